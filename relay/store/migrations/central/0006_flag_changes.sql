-- The change log of the flags (delta and streaming, relay.core.delta): per revision, the
-- flags and segments that revision changed, written in the write's own transaction
-- (relay.central.flags.writes), so no change is missed and none that rolled back is logged.
-- Every revision after flag_revision.changes_floor is in it; older ones are pruned by the
-- writes as the floor moves on (a client older than the floor gets a hydration).

CREATE TABLE flag_changes (
    revision INTEGER NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    project TEXT
);

CREATE INDEX flag_changes_revision ON flag_changes (revision);

ALTER TABLE flag_revision ADD COLUMN changes_floor INTEGER NOT NULL DEFAULT 0;

UPDATE flag_revision SET changes_floor = revision;

-- a write logs what carries its revision
CREATE INDEX features_revision ON features (revision);
CREATE INDEX segments_revision ON segments (revision);
