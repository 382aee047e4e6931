-- The last number given to a write of key_words and of flag_scopes (their `changed`, what the
-- other workers load past): kept apart from the rows, so that deleting the latest row (a
-- refusal pruned, a scope dropped) never gives its number again; the workers already past
-- it would never load the write that took it (relay.store.cache_file.next_change).

CREATE TABLE changes (
    name TEXT PRIMARY KEY,           -- the table: key_words or flag_scopes
    last INTEGER NOT NULL
);
