-- PostgreSQL twin of migrations/ingest/0002_edge_reports.sql: the latest report of each relay.

CREATE TABLE edge_reports (
    identifier TEXT PRIMARY KEY,
    app_name TEXT NOT NULL,
    via TEXT,
    reported_at DOUBLE PRECISION NOT NULL,
    report TEXT NOT NULL
);
