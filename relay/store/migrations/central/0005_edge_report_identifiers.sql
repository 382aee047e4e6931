-- Which identifiers have a report, in any scope (the relays page, for the relays known from
-- registrations' connectVia: up to 20,000 a view): read through this index, not by a scan of
-- every report per 100 identifiers.

CREATE INDEX edge_reports_identifier ON edge_reports (identifier);
