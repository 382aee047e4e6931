-- Flag copies and the hashes of the keys that read them move to cache.db (issue 20), so
-- that only counts decide what buffer_max_bytes evicts. Rows of a buffer.db written by an
-- older version are copied there before this runs (relay/store/cache_file.py).

DROP TABLE flag_keys;

DROP TABLE flag_scopes;
