-- Whether an outbox batch holds counts (1) or only registrations and impact samples (0),
-- so that eviction takes everything that is not a count before any count
-- (relay/edge/space.py). Batches written before: counts.

ALTER TABLE outbox ADD COLUMN counts INTEGER NOT NULL DEFAULT 1;
