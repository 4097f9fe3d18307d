-- The fleet generation (issue 12): one counter the database bumps in the same transaction as
-- every change to what an agent is served (pipelines, releases) or to how a node is known by
-- its token (the node row's identity, labels, versions, token and revocation). A server
-- keeps what it read tagged with the generation it was read at and uses it only while the
-- generation is unchanged (control/src/generation.rs). Triggers, so that no write path can
-- forget it. Last-seen times, host metrics and OpAMP protocol state do not bump it.
CREATE TABLE fleet_generation (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    value  INTEGER NOT NULL
);
INSERT INTO fleet_generation (id, value) VALUES (1, 1);

CREATE TRIGGER fleet_generation_pipelines_insert AFTER INSERT ON pipelines
BEGIN UPDATE fleet_generation SET value = value + 1; END;
CREATE TRIGGER fleet_generation_pipelines_update AFTER UPDATE ON pipelines
BEGIN UPDATE fleet_generation SET value = value + 1; END;
CREATE TRIGGER fleet_generation_pipelines_delete AFTER DELETE ON pipelines
BEGIN UPDATE fleet_generation SET value = value + 1; END;

CREATE TRIGGER fleet_generation_releases_insert AFTER INSERT ON releases
BEGIN UPDATE fleet_generation SET value = value + 1; END;
CREATE TRIGGER fleet_generation_releases_update AFTER UPDATE ON releases
BEGIN UPDATE fleet_generation SET value = value + 1; END;
CREATE TRIGGER fleet_generation_releases_delete AFTER DELETE ON releases
BEGIN UPDATE fleet_generation SET value = value + 1; END;

CREATE TRIGGER fleet_generation_nodes_update AFTER UPDATE ON nodes
WHEN OLD.environment_id IS NOT NEW.environment_id
  OR OLD.kind IS NOT NEW.kind
  OR OLD.name IS NOT NEW.name
  OR OLD.hostname IS NOT NEW.hostname
  OR OLD.os IS NOT NEW.os
  OR OLD.agent_version IS NOT NEW.agent_version
  OR OLD.vector_version IS NOT NEW.vector_version
  OR OLD.reported_labels IS NOT NEW.reported_labels
  OR OLD.operator_labels IS NOT NEW.operator_labels
  OR OLD.token_hash IS NOT NEW.token_hash
  OR OLD.poll_interval_ms IS NOT NEW.poll_interval_ms
  OR OLD.revoked_at IS NOT NEW.revoked_at
BEGIN UPDATE fleet_generation SET value = value + 1; END;
CREATE TRIGGER fleet_generation_nodes_delete AFTER DELETE ON nodes
BEGIN UPDATE fleet_generation SET value = value + 1; END;
