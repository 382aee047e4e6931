-- The rest of Unleash's flag model (standalone mode): a flag's dependency on a parent flag,
-- its variants per environment (Unleash's deprecated "environment variants") and its tags.
-- All are written by relay.central.flags.writes like every flag write (the change log
-- sees them).
--
-- One parent per flag, as Unleash keeps it: the child is the key. A parent cannot be
-- deleted while a child names it (no ON DELETE); a child's dependency goes with it.
-- variants: JSON text, the parent's variant names that satisfy it (only when enabled).

CREATE TABLE feature_dependencies (
    child TEXT PRIMARY KEY REFERENCES features (name) ON DELETE CASCADE,
    parent TEXT NOT NULL REFERENCES features (name),
    enabled INTEGER NOT NULL DEFAULT 1,
    variants TEXT NOT NULL DEFAULT '[]'
);

CREATE INDEX feature_dependencies_parent ON feature_dependencies (parent);

-- a flag's variants in one environment, JSON text as validated by relay.wire.variants
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
    created_at REAL NOT NULL,
    PRIMARY KEY (feature_name, tag_type, tag_value)
);
