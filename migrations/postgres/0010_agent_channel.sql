-- The live agent channel (issue 15). Log lines agents ship, the newest 1,000 per node and
-- pipeline (control/src/channel.rs trims older ones on every write).
CREATE TABLE node_logs (
    id           BIGSERIAL PRIMARY KEY,
    node_id      TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    pipeline_id  TEXT NOT NULL,
    at           BIGINT NOT NULL,
    line         TEXT NOT NULL
);
CREATE INDEX node_logs_node_pipeline ON node_logs(node_id, pipeline_id, id);

-- Answers to sample requests, one row per request and component; and events of live taps,
-- the newest 500 per tap. Both are shown to operators and never logged.
CREATE TABLE sample_results (
    request_id     TEXT NOT NULL,
    node_id        TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    component_key  TEXT NOT NULL,
    result         TEXT NOT NULL,
    at             BIGINT NOT NULL,
    PRIMARY KEY (request_id, component_key)
);
CREATE TABLE tap_events (
    id           BIGSERIAL PRIMARY KEY,
    request_id   TEXT NOT NULL,
    node_id      TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    pipeline_id  TEXT NOT NULL,
    component_id TEXT NOT NULL,
    body         TEXT NOT NULL,
    at           BIGINT NOT NULL
);
CREATE INDEX tap_events_request ON tap_events(request_id, id);

-- What the agent said of itself in its latest heartbeat (JSON: agentHealth, deploymentMode,
-- runningAs, updateError). Like host metrics, it does not bump the fleet generation.
ALTER TABLE nodes ADD COLUMN agent_report TEXT;
