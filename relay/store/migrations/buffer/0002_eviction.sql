-- Eviction keeps the newest data (relay/edge/space.py): each buffered count remembers when
-- it was last written, and is evicted oldest hour first, least recently written first.
-- Counts buffered before this migration count as the oldest.

ALTER TABLE metrics ADD COLUMN touched REAL NOT NULL DEFAULT 0;

CREATE INDEX metrics_age ON metrics (hour, touched);
