-- The event log (issue 23): every admin change, who made it, when, and the thing before and
-- after (JSON as the admin API shows it, bounded by relay.core.audit.MAX_DATA_BYTES),
-- written in the change's own transaction (relay.central.events), so a change that rolls
-- back logs nothing. Read newest first, by feature or project through their indexes; the
-- oldest pruned by the writes past event_log_kept events.

CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    type TEXT NOT NULL,
    created_by TEXT NOT NULL,
    project TEXT,
    feature_name TEXT,
    environment TEXT,
    data TEXT,
    pre_data TEXT
);

CREATE INDEX events_feature ON events (feature_name, id);
CREATE INDEX events_project ON events (project, id);
