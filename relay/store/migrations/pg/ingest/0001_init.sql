-- PostgreSQL twin of migrations/ingest/0001_init.sql: counts per (feature, app, environment,
-- UTC hour), registrations and idempotency keys. Same tables and columns; counts are BIGINT
-- (sums of many 2^31-1 counts), times DOUBLE PRECISION epoch seconds in UTC.

CREATE TABLE metrics (
    feature_name TEXT NOT NULL,
    app_name TEXT NOT NULL,
    environment TEXT NOT NULL,
    hour BIGINT NOT NULL,
    yes BIGINT NOT NULL,
    no BIGINT NOT NULL,
    PRIMARY KEY (feature_name, app_name, environment, hour)
);

CREATE TABLE metric_variants (
    feature_name TEXT NOT NULL,
    app_name TEXT NOT NULL,
    environment TEXT NOT NULL,
    hour BIGINT NOT NULL,
    variant TEXT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (feature_name, app_name, environment, hour, variant)
);

CREATE TABLE registrations (
    app_name TEXT NOT NULL,
    environment TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    connect_via TEXT NOT NULL,
    sdk_version TEXT,
    strategies TEXT NOT NULL,
    "interval" DOUBLE PRECISION,
    started DOUBLE PRECISION,
    first_seen DOUBLE PRECISION NOT NULL,
    last_seen DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (app_name, environment, instance_id)
);

CREATE TABLE idempotency_keys (
    key TEXT PRIMARY KEY,
    seen_at DOUBLE PRECISION NOT NULL
);

CREATE INDEX idempotency_keys_seen_at ON idempotency_keys (seen_at);
