-- The age of the oldest unsent write (the relay's report and its
-- relay_buffer_oldest_entry_age_seconds): each buffered count keeps when it was first
-- written (MetricsStore's insert; never refreshed, unlike `touched`), and an outbox batch
-- the oldest first write of the counts it was claimed from. Rows from before have none:
-- their hour (counts) or their claim (batches) stands in. No index on `written`: the
-- statistics read it in the pass that counts the buffered counts.

ALTER TABLE metrics ADD COLUMN written REAL;

ALTER TABLE outbox ADD COLUMN oldest_write REAL;
