-- Impact metrics (impactMetrics of SDKs and relays): one running state per series, where a
-- series is (environment, application, name, type, labels). `series` is a SHA-256 of those,
-- a short key whatever the labels; `state` is JSON (relay/core/impact.py). The central
-- service keeps them (pruned by age and per application); the relay's buffer holds them
-- until they are cut into outbox batches.

CREATE TABLE impact_metrics (
    series TEXT PRIMARY KEY,
    environment TEXT NOT NULL,
    app_name TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    labels TEXT NOT NULL,
    help TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;

CREATE INDEX impact_metrics_read ON impact_metrics (app_name, environment, name, series);
CREATE INDEX impact_metrics_environment ON impact_metrics (environment, updated_at);
CREATE INDEX impact_metrics_updated ON impact_metrics (updated_at);
