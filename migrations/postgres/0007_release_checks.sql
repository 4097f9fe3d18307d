-- When the scheduler next checks a baking release's gates (the earliest due check of its
-- current stage, before the bake deadline); NULL when no check remains. The scheduler reads
-- releases whose deadline or next check is due, so a check never waits for the deadline.
ALTER TABLE releases ADD COLUMN next_check_at BIGINT;

-- A version a vf-agent gave up on after it crashed repeatedly (`failedVersion` in its
-- heartbeat) and why, beside the version it actually runs; NULL when none.
ALTER TABLE node_pipeline_status ADD COLUMN failed_version BIGINT;
ALTER TABLE node_pipeline_status ADD COLUMN failed_reason TEXT;
