-- Relays report themselves (issue 17): the latest report of each relay, by its identifier.
-- A relay keeps those of the relays downstream of it (to pass on as connectedEdges); the
-- central service keeps every relay of the tree, each with the relay it came through.

CREATE TABLE edge_reports (
    identifier TEXT PRIMARY KEY,
    app_name TEXT NOT NULL,
    via TEXT,
    reported_at REAL NOT NULL,
    report TEXT NOT NULL
);
