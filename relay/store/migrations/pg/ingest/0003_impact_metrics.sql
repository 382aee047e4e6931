-- PostgreSQL twin of migrations/ingest/0003_impact_metrics.sql.

CREATE TABLE impact_metrics (
    series TEXT PRIMARY KEY,
    environment TEXT NOT NULL,
    app_name TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    labels TEXT NOT NULL,
    help TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);

CREATE INDEX impact_metrics_read ON impact_metrics (app_name, environment, name, series);
CREATE INDEX impact_metrics_environment ON impact_metrics (environment, updated_at);
CREATE INDEX impact_metrics_updated ON impact_metrics (updated_at);
