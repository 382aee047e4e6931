-- PostgreSQL twin of migrations/central/0006_flag_changes.sql: the change log of the flags,
-- written in each flag write's transaction, pruned as flag_revision.changes_floor moves on.

CREATE TABLE flag_changes (
    revision BIGINT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    project TEXT
);

CREATE INDEX flag_changes_revision ON flag_changes (revision);

ALTER TABLE flag_revision ADD COLUMN changes_floor BIGINT NOT NULL DEFAULT 0;

UPDATE flag_revision SET changes_floor = revision;

CREATE INDEX features_revision ON features (revision);
CREATE INDEX segments_revision ON segments (revision);
