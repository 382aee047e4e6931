-- PostgreSQL twin of migrations/central/0001_init.sql: projects, environments, API keys.
-- Flags stay INTEGER 0/1 as in SQLite, so the stores send the same parameters to both.

CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT,
    created_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE environments (
    name TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    sort_order INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE project_environments (
    project_id TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment TEXT NOT NULL REFERENCES environments (name) ON DELETE CASCADE,
    change_requests_enabled INTEGER NOT NULL DEFAULT 0,
    default_strategy TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (project_id, environment)
);

CREATE TABLE api_tokens (
    secret_hash TEXT PRIMARY KEY,
    display TEXT NOT NULL,
    type TEXT NOT NULL,
    environment TEXT NOT NULL,
    projects TEXT NOT NULL,
    token_name TEXT,
    created_at DOUBLE PRECISION NOT NULL
);

INSERT INTO projects (id, name, description, created_at)
VALUES ('default', 'Default', 'Default project', extract(epoch FROM now()));

INSERT INTO environments (name, type, enabled, sort_order, created_at) VALUES
    ('development', 'development', 1, 100, extract(epoch FROM now())),
    ('production', 'production', 1, 200, extract(epoch FROM now()));

INSERT INTO project_environments (project_id, environment, created_at) VALUES
    ('default', 'development', extract(epoch FROM now())),
    ('default', 'production', extract(epoch FROM now()));
