-- Feature flags (standalone mode): flags per project, their state and strategies per
-- environment, segments, and the revision every flag or segment write increments (the
-- client API's caches compare it). Strategy bodies (constraints, parameters, variants) are
-- JSON text as validated by relay.wire.strategies.

CREATE TABLE flag_revision (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL
);

INSERT INTO flag_revision (id, revision) VALUES (1, 0);

CREATE TABLE features (
    name TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (id),
    type TEXT NOT NULL,
    description TEXT,
    stale INTEGER NOT NULL DEFAULT 0,
    impression_data INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    archived_at REAL,
    revision INTEGER NOT NULL
);

CREATE INDEX features_project ON features (project_id, name);

CREATE TABLE feature_environments (
    feature_name TEXT NOT NULL REFERENCES features (name) ON DELETE CASCADE,
    environment TEXT NOT NULL REFERENCES environments (name) ON DELETE CASCADE,
    enabled INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (feature_name, environment)
);

CREATE TABLE feature_strategies (
    id TEXT PRIMARY KEY,
    feature_name TEXT NOT NULL,
    environment TEXT NOT NULL,
    name TEXT NOT NULL,
    title TEXT,
    disabled INTEGER NOT NULL DEFAULT 0,
    sort_order INTEGER NOT NULL,
    constraints TEXT NOT NULL,
    parameters TEXT NOT NULL,
    variants TEXT NOT NULL,
    created_at REAL NOT NULL,
    FOREIGN KEY (feature_name, environment)
        REFERENCES feature_environments (feature_name, environment) ON DELETE CASCADE
);

CREATE INDEX feature_strategies_feature ON feature_strategies (feature_name, environment);

CREATE TABLE segments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    description TEXT,
    project_id TEXT REFERENCES projects (id),
    constraints TEXT NOT NULL,
    created_at REAL NOT NULL,
    revision INTEGER NOT NULL
);

-- no ON DELETE on segment_id: a segment a strategy uses cannot be deleted
CREATE TABLE feature_strategy_segments (
    strategy_id TEXT NOT NULL REFERENCES feature_strategies (id) ON DELETE CASCADE,
    segment_id INTEGER NOT NULL REFERENCES segments (id),
    PRIMARY KEY (strategy_id, segment_id)
);

CREATE INDEX feature_strategy_segments_segment ON feature_strategy_segments (segment_id);

-- the unknown-flags report reads the last 24 hours of every feature's counts
CREATE INDEX metrics_hour ON metrics (hour);
