"""SQL backends (SQLite, PostgreSQL), group commit, migrations, and the ingest tables both
modes write."""
