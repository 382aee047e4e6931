-- Relay outbox: batches cut from the buffered counts, waiting for the upstream to take them.
-- A row leaves only when the upstream has acknowledged it; its idempotency key is fixed at
-- creation and reused on every retry, so a resend after a crash is recognised upstream.

CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    environment TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    body BLOB NOT NULL,
    entries INTEGER NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);

-- Batches the upstream refused for good (400, or 413 for a single entry): kept for an operator.
CREATE TABLE dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    environment TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    body BLOB NOT NULL,
    entries INTEGER NOT NULL,
    status INTEGER,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL
);

CREATE INDEX metrics_environment_hour ON metrics (environment, hour);
