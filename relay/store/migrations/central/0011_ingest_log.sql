-- The ingest log (issue 37): each group commit of counts, registrations and impact metrics
-- appends its merged batch as one row (JSON, ``relay.store.ingest_log``) instead of updating
-- the rows of metrics, metric_variants, registrations, application_counts and
-- impact_metrics; the fold (``relay.store.fold``) sums the log into those tables and deletes
-- what it summed, in one transaction. Instances on one PostgreSQL then never wait on each
-- other's row locks to answer 202. ``bytes``: the batch's length, which bounds a fold pass.
-- AUTOINCREMENT: ids never handed out again once the log is emptied, so a fold that takes
-- the rows up to the last id it saw ends however busy ingest is.

CREATE TABLE ingest_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    arrived REAL NOT NULL,
    bytes INTEGER NOT NULL,
    batch TEXT NOT NULL
);

-- What the database refused to fold, one count, registration or series at a time (below the
-- API's validation, so never expected): kept for an operator, logged and counted
-- (relay_fold_refused_total).
CREATE TABLE ingest_refused (
    id INTEGER PRIMARY KEY,
    arrived REAL NOT NULL,
    refused_at REAL NOT NULL,
    error TEXT NOT NULL,
    batch TEXT NOT NULL
);
