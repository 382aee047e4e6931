-- PostgreSQL twin of migrations/central/0007_flag_model.sql: a flag's dependency on a
-- parent (one parent, the child is the key) and its variants per environment (JSON text).

CREATE TABLE feature_dependencies (
    child TEXT PRIMARY KEY REFERENCES features (name) ON DELETE CASCADE,
    parent TEXT NOT NULL REFERENCES features (name),
    enabled INTEGER NOT NULL DEFAULT 1,
    variants TEXT NOT NULL DEFAULT '[]'
);

CREATE INDEX feature_dependencies_parent ON feature_dependencies (parent);

ALTER TABLE feature_environments ADD COLUMN variants TEXT NOT NULL DEFAULT '[]';
