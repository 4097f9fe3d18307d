-- OpAMP agents (kind 'otel-collector') are nodes keyed by instance_uid (lowercase hex).
-- Their protocol state: the last in-sync sequence number, capabilities, the last reported
-- remote-config hash, status and error, the last reported health, and the hash of the
-- last config offered.
ALTER TABLE nodes ADD COLUMN opamp_sequence_num INTEGER;
ALTER TABLE nodes ADD COLUMN opamp_capabilities INTEGER;
ALTER TABLE nodes ADD COLUMN opamp_config_hash TEXT;
ALTER TABLE nodes ADD COLUMN opamp_config_status TEXT;
ALTER TABLE nodes ADD COLUMN opamp_config_error TEXT;
ALTER TABLE nodes ADD COLUMN opamp_healthy INTEGER;
ALTER TABLE nodes ADD COLUMN opamp_health_error TEXT;
ALTER TABLE nodes ADD COLUMN opamp_offered_hash TEXT;

-- What each config hash offered to a node stands for (pipeline ids, names, versions,
-- checksums as JSON), so a status report for that hash maps to pipeline status rows.
CREATE TABLE opamp_offers (
    node_id      TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    config_hash  TEXT NOT NULL,
    pipelines    TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (node_id, config_hash)
);
