-- Relays' reports leave the ingest schema (issue 20): the standalone keeps them in a table
-- of its own schema (central/0004_edge_report_scope.sql), scoped by the key that posted
-- them; a relay keeps them in cache.db, apart from the counts of buffer.db. Reports are
-- sent again every minute, so none is carried over.

DROP TABLE edge_reports;
