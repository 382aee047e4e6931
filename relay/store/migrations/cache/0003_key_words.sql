-- The upstream's latest word on each SDK key a relay asked it about (/edge/validate) or
-- fetched flags with, by SHA-256 only (never the key): every worker of the relay takes it as
-- its own (relay.edge.key_words), and a key it vouched for is trusted again after a restart
-- while the upstream cannot be asked. Keys it refused that no worker ever held valid are
-- not written (made-up keys cost no row); the leader prunes the rest by age and number.

CREATE TABLE key_words (
    key_hash TEXT PRIMARY KEY,
    status INTEGER NOT NULL,         -- 200: vouched for; 401 or 403: refused
    type TEXT,                       -- when vouched for: client or frontend
    environment TEXT,
    projects TEXT,                   -- JSON list
    display TEXT,                    -- project:environment.**** for the logs
    token_name TEXT,                 -- the name the upstream gave it
    said_at REAL NOT NULL,           -- wall clock
    changed INTEGER NOT NULL         -- increases with every write: what other workers load
);

CREATE INDEX key_words_changed ON key_words (changed);
