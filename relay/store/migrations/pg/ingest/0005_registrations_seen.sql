-- PostgreSQL twin of migrations/ingest/0005_registrations_seen.sql.

CREATE INDEX registrations_app_seen ON registrations (app_name, environment, last_seen, instance_id);
CREATE INDEX registrations_seen ON registrations (last_seen);
