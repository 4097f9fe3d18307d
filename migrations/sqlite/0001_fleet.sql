-- Fleet, pipelines, releases, agent status and metrics.
-- Times are unix milliseconds (INTEGER). JSON documents are TEXT.
-- Every row a state transition touches carries row_version for compare-and-set.

CREATE TABLE environments (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE enrollment_tokens (
    id              TEXT PRIMARY KEY,
    environment_id  TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    token_hash      TEXT NOT NULL UNIQUE,
    prefix          TEXT NOT NULL,
    label           TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    revoked_at      INTEGER
);

CREATE TABLE nodes (
    id               TEXT PRIMARY KEY,
    environment_id   TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL,
    name             TEXT NOT NULL,
    hostname         TEXT NOT NULL,
    os               TEXT,
    agent_version    TEXT,
    vector_version   TEXT,
    reported_labels  TEXT NOT NULL DEFAULT '{}',
    operator_labels  TEXT NOT NULL DEFAULT '{}',
    token_hash       TEXT UNIQUE,
    instance_uid     TEXT UNIQUE,
    host_metrics     TEXT,
    poll_interval_ms INTEGER NOT NULL,
    enrolled_at      INTEGER NOT NULL,
    last_seen_at     INTEGER,
    disconnected_at  INTEGER,
    revoked_at       INTEGER
);
CREATE INDEX nodes_environment ON nodes(environment_id);

CREATE TABLE node_groups (
    id              TEXT PRIMARY KEY,
    environment_id  TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    criteria        TEXT NOT NULL DEFAULT '{}',
    created_at      INTEGER NOT NULL,
    UNIQUE (environment_id, name)
);

CREATE TABLE pipelines (
    id                TEXT PRIMARY KEY,
    environment_id    TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    name              TEXT NOT NULL,
    node_selector     TEXT NOT NULL DEFAULT '{}',
    log_level         TEXT,
    deployed_version  INTEGER,
    row_version       INTEGER NOT NULL DEFAULT 1,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    UNIQUE (environment_id, name)
);

CREATE TABLE pipeline_versions (
    pipeline_id  TEXT NOT NULL REFERENCES pipelines(id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    config_yaml  TEXT NOT NULL,
    checksum     TEXT NOT NULL,
    changelog    TEXT NOT NULL DEFAULT '',
    author       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (pipeline_id, version)
);

CREATE TABLE releases (
    id                  TEXT PRIMARY KEY,
    pipeline_id         TEXT NOT NULL REFERENCES pipelines(id) ON DELETE CASCADE,
    canary_version      INTEGER NOT NULL,
    previous_version    INTEGER,
    status              TEXT NOT NULL,
    plan                TEXT,
    planless            INTEGER NOT NULL DEFAULT 0,
    stages              TEXT NOT NULL DEFAULT '[]',
    current_stage       INTEGER NOT NULL DEFAULT 0,
    bake_deadline       INTEGER,
    baseline_eps        DOUBLE PRECISION,
    hold_reason         TEXT,
    failure_reason      TEXT,
    created_by          TEXT NOT NULL,
    updated_by          TEXT NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    completed_at        INTEGER,
    row_version         INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX releases_pipeline ON releases(pipeline_id, created_at);
-- At most one release in flight per pipeline, whatever races.
CREATE UNIQUE INDEX releases_one_in_flight ON releases(pipeline_id)
    WHERE status IN ('CANARY_DEPLOYED', 'HEALTH_CHECK');

CREATE TABLE node_pipeline_status (
    node_id           TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    pipeline_id       TEXT NOT NULL,
    version           INTEGER,
    status            TEXT NOT NULL,
    events_in         INTEGER NOT NULL DEFAULT 0,
    events_out        INTEGER NOT NULL DEFAULT 0,
    errors_total      INTEGER NOT NULL DEFAULT 0,
    events_discarded  INTEGER NOT NULL DEFAULT 0,
    bytes_in          INTEGER NOT NULL DEFAULT 0,
    bytes_out         INTEGER NOT NULL DEFAULT 0,
    uptime_seconds    INTEGER,
    pid               INTEGER,
    config_checksum   TEXT,
    message           TEXT,
    recent_logs       TEXT,
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (node_id, pipeline_id)
);

-- Per-minute deltas computed from cumulative counters, per node, pipeline and version run.
CREATE TABLE node_pipeline_metrics (
    node_id           TEXT NOT NULL,
    pipeline_id       TEXT NOT NULL,
    version           INTEGER NOT NULL,
    minute            INTEGER NOT NULL,
    events_in         INTEGER NOT NULL DEFAULT 0,
    events_out        INTEGER NOT NULL DEFAULT 0,
    errors            INTEGER NOT NULL DEFAULT 0,
    events_discarded  INTEGER NOT NULL DEFAULT 0,
    bytes_in          INTEGER NOT NULL DEFAULT 0,
    bytes_out         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (node_id, pipeline_id, version, minute)
);
CREATE INDEX node_pipeline_metrics_pipeline ON node_pipeline_metrics(pipeline_id, minute);

-- Per-minute aggregates per pipeline: the rollups the throughput gate reads.
CREATE TABLE pipeline_metrics (
    pipeline_id       TEXT NOT NULL,
    minute            INTEGER NOT NULL,
    events_in         INTEGER NOT NULL DEFAULT 0,
    events_out        INTEGER NOT NULL DEFAULT 0,
    errors            INTEGER NOT NULL DEFAULT 0,
    events_discarded  INTEGER NOT NULL DEFAULT 0,
    bytes_in          INTEGER NOT NULL DEFAULT 0,
    bytes_out         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (pipeline_id, minute)
);

CREATE TABLE audit_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    at           INTEGER NOT NULL,
    actor        TEXT NOT NULL,
    action       TEXT NOT NULL,
    target_kind  TEXT NOT NULL,
    target_id    TEXT NOT NULL,
    environment_id TEXT,
    details      TEXT NOT NULL DEFAULT '{}',
    ip           TEXT,
    prev_hash    TEXT NOT NULL DEFAULT '',
    hash         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_events_target ON audit_events(target_kind, target_id);
