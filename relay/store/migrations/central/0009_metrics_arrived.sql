-- When each count last arrived (the web page's "last seen" of a flag): set by every write
-- of the central service's MetricsStore. Counts stored before have none: their hour stands in.

ALTER TABLE metrics ADD COLUMN arrived REAL;
