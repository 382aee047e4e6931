-- Relay flag cache: per scope (the projects and environment of SDK keys), the upstream's
-- last answer to GET /api/client/features, so that a relay restarted while its upstream is
-- down serves flags at once. Written by whichever worker fetched; read by every worker.

CREATE TABLE flag_scopes (
    scope TEXT PRIMARY KEY,          -- JSON [environment, [projects], discriminator or null]
    body BLOB,                       -- the upstream's answer as it came; NULL until a first one
    etag TEXT,                       -- the upstream's ETag of it, for If-None-Match
    fetched_at REAL,                 -- when the upstream last confirmed it (200 or 304)
    due_at REAL NOT NULL,            -- next refresh: the worker that moves it on refreshes
    changed INTEGER NOT NULL         -- increases with every write: what other workers load
);

CREATE INDEX flag_scopes_changed ON flag_scopes (changed);

-- SDK keys that read flags through this relay, by SHA-256 only (never the key): after a
-- restart while the upstream is down they are still known, and their scope served.
CREATE TABLE flag_keys (
    key_hash TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    display TEXT NOT NULL,           -- project:environment.**** for the logs
    seen_at REAL NOT NULL
);
