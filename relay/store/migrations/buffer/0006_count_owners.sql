-- Whose each buffered count is: the key that posted it (a hash of it, relay.core.ingest_batch.
-- Origin), or nobody's (0) once another key added to it. A full buffer makes room for a
-- key's new counts out of that key's own oldest (relay.store.own_room), along this index
-- (hour, touched, then the key's columns, which end each entry). Counts buffered before
-- are nobody's: no eviction takes them.

ALTER TABLE metrics ADD COLUMN owner INTEGER NOT NULL DEFAULT 0;

DROP INDEX metrics_age;

CREATE INDEX metrics_owner_age ON metrics (owner, hour, touched);
