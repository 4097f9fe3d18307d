-- Customer-keyed rolling rollouts (SPEC section 6). Each rollout is one JSON document
-- (vf_rolling::Rollout: global entry, org overrides, flip log, retirement), changed only
-- through vf-rolling's operations and saved by compare-and-set on row_version.
CREATE TABLE rollouts (
    name         TEXT PRIMARY KEY,
    doc          TEXT NOT NULL,
    row_version  INTEGER NOT NULL DEFAULT 1,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

-- The published document's version: bumped with every routing change, it is the ETag.
CREATE TABLE edge_config_state (
    id       INTEGER PRIMARY KEY,
    version  INTEGER NOT NULL
);
INSERT INTO edge_config_state (id, version) VALUES (1, 0);
