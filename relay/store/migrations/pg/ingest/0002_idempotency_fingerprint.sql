-- PostgreSQL twin of migrations/ingest/0002_idempotency_fingerprint.sql: idempotency keys
-- scoped by caller ("<caller>/<key>") and remembered with their request's fingerprint.

ALTER TABLE idempotency_keys ADD COLUMN fingerprint TEXT;
