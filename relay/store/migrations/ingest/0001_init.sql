-- Counts per (feature, app, environment, UTC hour), registrations and idempotency keys.
-- Shared by the central store and the relay's buffer: both ingest through the same code.

CREATE TABLE metrics (
    feature_name TEXT NOT NULL,
    app_name TEXT NOT NULL,
    environment TEXT NOT NULL,
    hour INTEGER NOT NULL,
    yes INTEGER NOT NULL,
    no INTEGER NOT NULL,
    PRIMARY KEY (feature_name, app_name, environment, hour)
) WITHOUT ROWID;

CREATE TABLE metric_variants (
    feature_name TEXT NOT NULL,
    app_name TEXT NOT NULL,
    environment TEXT NOT NULL,
    hour INTEGER NOT NULL,
    variant TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (feature_name, app_name, environment, hour, variant)
) WITHOUT ROWID;

CREATE TABLE registrations (
    app_name TEXT NOT NULL,
    environment TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    connect_via TEXT NOT NULL,
    sdk_version TEXT,
    strategies TEXT NOT NULL,
    interval REAL,
    started REAL,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    PRIMARY KEY (app_name, environment, instance_id)
) WITHOUT ROWID;

CREATE TABLE idempotency_keys (
    key TEXT PRIMARY KEY,
    seen_at REAL NOT NULL
) WITHOUT ROWID;

CREATE INDEX idempotency_keys_seen_at ON idempotency_keys (seen_at);
