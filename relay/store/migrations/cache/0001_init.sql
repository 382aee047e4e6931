-- A relay's cache.db: what it holds besides counts, bounded on its own and never evicting
-- them (buffer_max_bytes is for buffer.db). Flag copies and key hashes as buffer.db held
-- them before (buffer/0002_flag_cache.sql); relays' reports as the standalone keeps them
-- (central/0004_edge_report_scope.sql).

CREATE TABLE flag_scopes (
    scope TEXT PRIMARY KEY,          -- JSON [environment, [projects], discriminator or null]
    body BLOB,                       -- the upstream's answer as it came; NULL until a first one
    etag TEXT,                       -- the upstream's ETag of it, for If-None-Match
    fetched_at REAL,                 -- when the upstream last confirmed it (200 or 304)
    due_at REAL NOT NULL,            -- next refresh: the worker that moves it on refreshes
    changed INTEGER NOT NULL         -- increases with every write: what other workers load
);

CREATE INDEX flag_scopes_changed ON flag_scopes (changed);

-- SDK keys that read flags through this relay, by SHA-256 only (never the key).
CREATE TABLE flag_keys (
    key_hash TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    display TEXT NOT NULL,           -- project:environment.**** for the logs
    seen_at REAL NOT NULL
);

CREATE TABLE edge_reports (
    environment TEXT NOT NULL,
    projects TEXT NOT NULL,
    identifier TEXT NOT NULL,
    app_name TEXT NOT NULL,
    via TEXT,
    reported_at REAL NOT NULL,
    report TEXT NOT NULL,
    PRIMARY KEY (environment, projects, identifier)
);

CREATE INDEX edge_reports_age ON edge_reports (reported_at);
