-- Registrations by when each instance was last seen: the bound per application and
-- environment (the least recently seen beyond it are deleted) and the prune by age read
-- along these, however many instances there are.

CREATE INDEX registrations_app_seen ON registrations (app_name, environment, last_seen, instance_id);
CREATE INDEX registrations_seen ON registrations (last_seen);
