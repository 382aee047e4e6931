-- PostgreSQL twin of migrations/central/0007_flag_model.sql: a flag's dependency on a
-- parent (one parent, the child is the key), its variants per environment (JSON text) and
-- its tags.

CREATE TABLE feature_dependencies (
    child TEXT PRIMARY KEY REFERENCES features (name) ON DELETE CASCADE,
    parent TEXT NOT NULL REFERENCES features (name),
    enabled INTEGER NOT NULL DEFAULT 1,
    variants TEXT NOT NULL DEFAULT '[]'
);

CREATE INDEX feature_dependencies_parent ON feature_dependencies (parent);

ALTER TABLE feature_environments ADD COLUMN variants TEXT NOT NULL DEFAULT '[]';

-- Tags of flags (admin only: SDKs do not get them), each of a tag type; Unleash's default
-- type "simple" is there from the start. A tag type's tags go with it.
CREATE TABLE tag_types (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    icon TEXT,
    color TEXT
);

INSERT INTO tag_types (name, description, icon)
    VALUES ('simple', 'Used to simplify filtering of features', '#');

CREATE TABLE feature_tags (
    feature_name TEXT NOT NULL REFERENCES features (name) ON DELETE CASCADE,
    tag_type TEXT NOT NULL REFERENCES tag_types (name) ON DELETE CASCADE,
    tag_value TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (feature_name, tag_type, tag_value)
);
