-- Whole-fleet reads join an environment's nodes to their reports by node id: an index on
-- (environment_id, id) answers the join from the index alone (about a fifth faster at
-- 100,000 nodes on SQLite). It replaces the index on environment_id, its prefix.
CREATE INDEX nodes_environment_id ON nodes(environment_id, id);
DROP INDEX nodes_environment;
