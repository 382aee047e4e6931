-- PostgreSQL twin of migrations/central/0011_ingest_log.sql. Identity ids are never handed
-- out again; they are handed out as rows are inserted, not as they commit: the fold takes
-- whatever is committed, in id order, and never reasons about gaps.

CREATE TABLE ingest_log (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    arrived DOUBLE PRECISION NOT NULL,
    bytes BIGINT NOT NULL,
    batch TEXT NOT NULL
);

CREATE TABLE ingest_refused (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    arrived DOUBLE PRECISION NOT NULL,
    refused_at DOUBLE PRECISION NOT NULL,
    error TEXT NOT NULL,
    batch TEXT NOT NULL
);
