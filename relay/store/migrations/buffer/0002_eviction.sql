-- Eviction keeps the newest data (relay/edge/space.py): each buffered count remembers when
-- it was last written, and is evicted oldest hour first, least recently written first.
-- MetricsStore sets `touched` when it inserts a count; the trigger refreshes it when the
-- count is added to, at most every 50 ms: rewriting the index on every write of a hot
-- count cost a fifth of the relay's commit time. Counts buffered before this migration
-- count as the oldest.

ALTER TABLE metrics ADD COLUMN touched REAL NOT NULL DEFAULT 0;

CREATE INDEX metrics_age ON metrics (hour, touched);

CREATE TRIGGER metrics_touched AFTER UPDATE OF yes, no ON metrics WHEN old.touched < (julianday('now') - 2440587.5) * 86400.0 - 0.05 BEGIN UPDATE metrics SET touched = (julianday('now') - 2440587.5) * 86400.0 WHERE feature_name = new.feature_name AND app_name = new.app_name AND environment = new.environment AND hour = new.hour; END;
