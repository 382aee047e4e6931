-- The latest report of each relay, kept under the scope of the client key that posted it
-- (its environment and projects): a key can replace only the reports of its own scope.
-- relay/store/edge_reports.py bounds how many are kept per scope and in all.

CREATE TABLE edge_reports (
    environment TEXT NOT NULL,
    projects TEXT NOT NULL,          -- JSON list of the key's projects, sorted; ["*"]: all
    identifier TEXT NOT NULL,
    app_name TEXT NOT NULL,
    via TEXT,
    reported_at REAL NOT NULL,
    report TEXT NOT NULL,            -- relay.wire.edges.EdgeInstanceData as JSON
    PRIMARY KEY (environment, projects, identifier)
);

CREATE INDEX edge_reports_age ON edge_reports (reported_at);
