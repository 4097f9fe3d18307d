-- The fleet generation (issue 12): one counter the database bumps in the same transaction as
-- every change to what an agent is served (pipelines, releases) or to how a node is known by
-- its token (the node row's identity, labels, versions, token and revocation). A server
-- keeps what it read tagged with the generation it was read at and uses it only while the
-- generation is unchanged (control/src/generation.rs). Triggers, so that no write path can
-- forget it. Last-seen times, host metrics and OpAMP protocol state do not bump it.
--
-- The triggers are deferred to the commit: the counter's row lock is then the last lock a
-- transaction takes, so two transactions can never wait for each other through it.
CREATE TABLE fleet_generation (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    value  BIGINT NOT NULL
);
INSERT INTO fleet_generation (id, value) VALUES (1, 1);

CREATE FUNCTION fleet_generation_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fleet_generation SET value = value + 1;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER fleet_generation_pipelines
AFTER INSERT OR UPDATE OR DELETE ON pipelines
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fleet_generation_bump();

CREATE CONSTRAINT TRIGGER fleet_generation_releases
AFTER INSERT OR UPDATE OR DELETE ON releases
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fleet_generation_bump();

CREATE CONSTRAINT TRIGGER fleet_generation_nodes_update
AFTER UPDATE ON nodes
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (OLD.environment_id IS DISTINCT FROM NEW.environment_id
   OR OLD.kind IS DISTINCT FROM NEW.kind
   OR OLD.name IS DISTINCT FROM NEW.name
   OR OLD.hostname IS DISTINCT FROM NEW.hostname
   OR OLD.os IS DISTINCT FROM NEW.os
   OR OLD.agent_version IS DISTINCT FROM NEW.agent_version
   OR OLD.vector_version IS DISTINCT FROM NEW.vector_version
   OR OLD.reported_labels IS DISTINCT FROM NEW.reported_labels
   OR OLD.operator_labels IS DISTINCT FROM NEW.operator_labels
   OR OLD.token_hash IS DISTINCT FROM NEW.token_hash
   OR OLD.poll_interval_ms IS DISTINCT FROM NEW.poll_interval_ms
   OR OLD.revoked_at IS DISTINCT FROM NEW.revoked_at)
EXECUTE FUNCTION fleet_generation_bump();

CREATE CONSTRAINT TRIGGER fleet_generation_nodes_delete
AFTER DELETE ON nodes
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fleet_generation_bump();
