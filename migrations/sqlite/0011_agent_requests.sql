-- What operators ask of one node through the live agent channel (issue 15): sample events,
-- start or stop a tap, restart a pipeline. `message` is the push message itself (JSON). A
-- request is pending until `expires_at`; the config route lists pending sample requests for
-- agents without a push stream, and every replica's push watcher sends new ones to the agents
-- connected to it. Inserting one bumps the fleet generation, which is how every replica
-- (and the delivery view, which carries pending requests) hears of it.
CREATE TABLE agent_requests (
    id              TEXT PRIMARY KEY,
    node_id         TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    environment_id  TEXT NOT NULL,
    kind            TEXT NOT NULL,
    pipeline_id     TEXT,
    message         TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL
);
CREATE INDEX agent_requests_environment ON agent_requests(environment_id, expires_at);

CREATE TRIGGER fleet_generation_agent_requests_insert AFTER INSERT ON agent_requests
BEGIN UPDATE fleet_generation SET value = value + 1; END;

-- A tap's entries are its events, and its end as the agent reported it ({status, reason}).
ALTER TABLE tap_events ADD COLUMN kind TEXT NOT NULL DEFAULT 'event';

-- Per node and pipeline, the componentMetrics of its latest heartbeat (JSON, as reported).
ALTER TABLE node_pipeline_status ADD COLUMN component_metrics TEXT;
