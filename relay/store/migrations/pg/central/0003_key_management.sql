-- PostgreSQL twin of migrations/central/0003_key_management.sql: key ids and last use, the
-- key revision other instances poll, and the web page's sessions (stored hashed).

ALTER TABLE api_tokens ADD COLUMN id TEXT;

ALTER TABLE api_tokens ADD COLUMN last_used_at DOUBLE PRECISION;

UPDATE api_tokens SET id = substr(md5(random()::text || secret_hash), 1, 16);

CREATE UNIQUE INDEX api_tokens_id ON api_tokens (id);

CREATE TABLE key_revision (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    revision BIGINT NOT NULL
);

INSERT INTO key_revision (id, revision) VALUES (1, 0);

CREATE TABLE web_sessions (
    session_hash TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,
    csrf_token TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);

CREATE INDEX web_sessions_expires ON web_sessions (expires_at);
