-- Central service records (standalone mode): projects, environments, API keys. Times are Unix epoch seconds (REAL) in UTC.

CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT,
    created_at REAL NOT NULL
);

CREATE TABLE environments (
    name TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    sort_order INTEGER NOT NULL,
    created_at REAL NOT NULL
);

CREATE TABLE project_environments (
    project_id TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment TEXT NOT NULL REFERENCES environments (name) ON DELETE CASCADE,
    change_requests_enabled INTEGER NOT NULL DEFAULT 0,
    default_strategy TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (project_id, environment)
);

CREATE TABLE api_tokens (
    secret_hash TEXT PRIMARY KEY,
    display TEXT NOT NULL,
    type TEXT NOT NULL,
    environment TEXT NOT NULL,
    projects TEXT NOT NULL,
    token_name TEXT,
    created_at REAL NOT NULL
);

INSERT INTO projects (id, name, description, created_at)
VALUES ('default', 'Default', 'Default project', ((julianday('now') - 2440587.5) * 86400.0));

INSERT INTO environments (name, type, enabled, sort_order, created_at) VALUES
    ('development', 'development', 1, 100, ((julianday('now') - 2440587.5) * 86400.0)),
    ('production', 'production', 1, 200, ((julianday('now') - 2440587.5) * 86400.0));

INSERT INTO project_environments (project_id, environment, created_at) VALUES
    ('default', 'development', ((julianday('now') - 2440587.5) * 86400.0)),
    ('default', 'production', ((julianday('now') - 2440587.5) * 86400.0));
