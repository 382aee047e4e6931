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

-- Every flag write's revision is announced to the other instances when it commits (NOTIFY
-- is transactional: a write that rolls back announces nothing); each listens, and wakes
-- its streams at once instead of at its next read of the revision.
CREATE FUNCTION relay_flag_revision_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('relay_flag_revision', NEW.revision::text);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER flag_revision_notify AFTER UPDATE OF revision ON flag_revision
    FOR EACH ROW EXECUTE FUNCTION relay_flag_revision_notify();
