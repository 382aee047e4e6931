-- Key management (issue 17): keys get an id to be listed and revoked by, and the time of
-- their last use (written in batches, never per request); a revision every revocation
-- increments, which other workers and instances poll to drop revoked keys from their
-- caches; and the web page's sessions, stored by the hash of their id, each bound to the
-- admin key it was opened with (a session whose key is revoked is no longer found).

ALTER TABLE api_tokens ADD COLUMN id TEXT;

ALTER TABLE api_tokens ADD COLUMN last_used_at REAL;

UPDATE api_tokens SET id = lower(hex(randomblob(8)));

CREATE UNIQUE INDEX api_tokens_id ON api_tokens (id);

CREATE TABLE key_revision (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL
);

INSERT INTO key_revision (id, revision) VALUES (1, 0);

CREATE TABLE web_sessions (
    session_hash TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,
    csrf_token TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);

CREATE INDEX web_sessions_expires ON web_sessions (expires_at);
