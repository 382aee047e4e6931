-- The revision of the delta protocol a scope's copy is at (relay.edge.flags.revisions): kept
-- with the copy, so SDKs streaming through the relay resume after its restart.

ALTER TABLE flag_scopes ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
