//! Data access of the OpAMP path: agents are nodes of kind `otel-collector` keyed by
//! `instance_uid`, with their protocol state in the `opamp_*` columns; offers remember
//! which pipeline versions a config hash stands for.

use super::config::{Offer, OfferedPipeline};
use super::identity::{AgentFacts, InstanceUid};
use super::status::ProcessStatus;
use crate::fleet::{enroll_node, Credential, Environment, NewNode, NodeRow, NODE_COLUMNS};
use crate::{ControlError, Db, Result};

/// Node kind of agents speaking OpAMP.
pub const KIND_OTEL_COLLECTOR: &str = "otel-collector";

/// A node with its OpAMP state.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AgentRow {
    #[sqlx(flatten)]
    pub node: NodeRow,
    /// Lowercase hex of the 16-byte uid.
    pub instance_uid: Option<String>,
    pub opamp_sequence_num: Option<i64>,
    pub opamp_capabilities: Option<i64>,
    pub opamp_config_hash: Option<String>,
    pub opamp_config_status: Option<String>,
    pub opamp_config_error: Option<String>,
    pub opamp_healthy: Option<i64>,
    pub opamp_health_error: Option<String>,
    pub opamp_offered_hash: Option<String>,
}

const AGENT_COLUMNS: &str =
    "instance_uid, opamp_sequence_num, opamp_capabilities, opamp_config_hash, \
    opamp_config_status, opamp_config_error, opamp_healthy, opamp_health_error, \
    opamp_offered_hash";

/// The protocol state a message leaves behind, written in one statement.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentState {
    pub facts: Option<AgentFacts>,
    pub sequence_num: Option<i64>,
    pub capabilities: Option<i64>,
    pub config_hash: Option<String>,
    pub config_status: Option<String>,
    pub config_error: Option<String>,
    pub healthy: Option<i64>,
    pub health_error: Option<String>,
}

pub async fn find_agent(db: &Db, uid: &InstanceUid) -> Result<Option<AgentRow>> {
    Ok(sqlx::query_as::<_, AgentRow>(crate::sql!(
        "SELECT {NODE_COLUMNS}, {AGENT_COLUMNS} FROM nodes WHERE instance_uid = $1"
    ))
    .bind(uid.hex())
    .fetch_optional(&db.pool)
    .await?)
}

pub async fn get_agent(db: &Db, node_id: &str) -> Result<AgentRow> {
    sqlx::query_as::<_, AgentRow>(crate::sql!(
        "SELECT {NODE_COLUMNS}, {AGENT_COLUMNS} FROM nodes WHERE id = $1"
    ))
    .bind(node_id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("node {node_id}")))
}

/// Registers an agent on first contact. Two replicas racing on the same uid register it
/// once: the loser reads the winner's row.
pub async fn register(
    db: &Db,
    env: &Environment,
    uid: &InstanceUid,
    facts: &AgentFacts,
    poll_interval_ms: i64,
    now: i64,
) -> Result<AgentRow> {
    let node = NewNode {
        kind: KIND_OTEL_COLLECTOR,
        name: &facts.name,
        hostname: &facts.hostname,
        os: facts.os.as_deref(),
        agent_version: facts.agent_version.as_deref(),
        vector_version: None,
        labels: &facts.labels,
        credential: Credential::InstanceUid(&uid.hex()),
        poll_interval_ms,
    };
    if let Some(node_id) = enroll_node(db, env, node, now).await? {
        tracing::info!(
            node_id,
            instance_uid = uid.hex(),
            environment = env.name,
            "OpAMP agent registered"
        );
    }
    find_agent(db, uid)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("agent {}", uid.hex())))
}

/// Records one message: the node was seen now (and is connected), plus what it reported.
pub async fn record(db: &Db, node_id: &str, state: &AgentState, now: i64) -> Result<()> {
    let facts = state.facts.as_ref();
    let labels = facts
        .map(|f| serde_json::to_string(&f.labels))
        .transpose()?;
    sqlx::query(
        "UPDATE nodes SET last_seen_at = $1, disconnected_at = NULL,
            name = COALESCE($2, name), hostname = COALESCE($3, hostname),
            os = COALESCE($4, os), agent_version = COALESCE($5, agent_version),
            reported_labels = COALESCE($6, reported_labels),
            opamp_sequence_num = $7, opamp_capabilities = $8, opamp_config_hash = $9,
            opamp_config_status = $10, opamp_config_error = $11, opamp_healthy = $12,
            opamp_health_error = $13
         WHERE id = $14",
    )
    .bind(now)
    .bind(facts.map(|f| f.name.clone()))
    .bind(facts.map(|f| f.hostname.clone()))
    .bind(facts.and_then(|f| f.os.clone()))
    .bind(facts.and_then(|f| f.agent_version.clone()))
    .bind(labels)
    .bind(state.sequence_num)
    .bind(state.capabilities)
    .bind(&state.config_hash)
    .bind(&state.config_status)
    .bind(&state.config_error)
    .bind(state.healthy)
    .bind(&state.health_error)
    .bind(node_id)
    .execute(&db.pool)
    .await?;
    if facts.is_some() {
        // Facts may have changed the node's labels: bump seen (SQLite mirrors the generation).
        db.refresh_generation().await?;
    }
    Ok(())
}

/// The agent said goodbye: offline at once, not after three missed polls.
pub async fn disconnect(db: &Db, node_id: &str, now: i64) -> Result<()> {
    sqlx::query("UPDATE nodes SET last_seen_at = $1, disconnected_at = $1 WHERE id = $2")
        .bind(now)
        .bind(node_id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

const UPSERT_OFFER: &str = "INSERT INTO opamp_offers (node_id, config_hash, pipelines, created_at)
     VALUES ($1, $2, $3, $4)
     ON CONFLICT (node_id, config_hash) DO UPDATE SET pipelines = excluded.pipelines";

/// Remembers which pipeline versions an offer's hash stands for on this node (the latest
/// versions with that exact content).
pub async fn remember_offer(db: &Db, node_id: &str, offer: &Offer, now: i64) -> Result<()> {
    sqlx::query(UPSERT_OFFER)
        .bind(node_id)
        .bind(offer.hash_hex())
        .bind(serde_json::to_string(&offer.pipelines)?)
        .bind(now)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Remembers the offer and that it was sent to the node, together.
pub async fn save_offer(db: &Db, node_id: &str, offer: &Offer, now: i64) -> Result<()> {
    let mut tx = db.pool.begin().await?;
    sqlx::query(UPSERT_OFFER)
        .bind(node_id)
        .bind(offer.hash_hex())
        .bind(serde_json::to_string(&offer.pipelines)?)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE nodes SET opamp_offered_hash = $1 WHERE id = $2")
        .bind(offer.hash_hex())
        .bind(node_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// The pipeline versions behind a config hash this node was offered; `None` for a hash
/// the server never sent it.
pub async fn offered_pipelines(
    db: &Db,
    node_id: &str,
    hash_hex: &str,
) -> Result<Option<Vec<OfferedPipeline>>> {
    let doc = sqlx::query_scalar::<_, String>(
        "SELECT pipelines FROM opamp_offers WHERE node_id = $1 AND config_hash = $2",
    )
    .bind(node_id)
    .bind(hash_hex)
    .fetch_optional(&db.pool)
    .await?;
    doc.map(|d| serde_json::from_str(&d).map_err(ControlError::from))
        .transpose()
}

/// Writes the node's pipeline status rows for the pipelines of its reported config (a
/// collector has no event counters: they stay zero). With `stop_others`, the config was
/// applied, so any other pipeline this node still has a live row for is reported STOPPED,
/// once, as a vf-agent reports a pipeline it removed.
pub async fn write_statuses(
    db: &Db,
    node_id: &str,
    rows: &[(OfferedPipeline, ProcessStatus)],
    stop_others: bool,
    now: i64,
) -> Result<()> {
    let mut tx = db.pool.begin().await?;
    for (p, s) in rows {
        sqlx::query(
            "INSERT INTO node_pipeline_status (node_id, pipeline_id, version, status,
                config_checksum, message, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (node_id, pipeline_id) DO UPDATE SET version = excluded.version,
                status = excluded.status, events_in = 0, events_out = 0, errors_total = 0,
                events_discarded = 0, bytes_in = 0, bytes_out = 0, uptime_seconds = NULL,
                pid = NULL, config_checksum = excluded.config_checksum,
                message = excluded.message, updated_at = excluded.updated_at",
        )
        .bind(node_id)
        .bind(&p.pipeline_id)
        .bind(p.version)
        .bind(s.status)
        .bind(&p.checksum)
        .bind(&s.message)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    // A FAILED (or unhealthy) config is checked by the scheduler's next tick.
    let crashed: Vec<(&str, i64)> = (rows.iter())
        .filter(|(_, s)| s.status == "CRASHED")
        .map(|(p, _)| (p.pipeline_id.as_str(), p.version))
        .collect();
    crate::releases::check_soon(&mut tx, &crashed, now).await?;
    if stop_others {
        let live = sqlx::query_scalar::<_, String>(
            "SELECT pipeline_id FROM node_pipeline_status
             WHERE node_id = $1 AND status <> 'STOPPED'",
        )
        .bind(node_id)
        .fetch_all(&mut *tx)
        .await?;
        for pipeline_id in live {
            if rows.iter().any(|(p, _)| p.pipeline_id == pipeline_id) {
                continue;
            }
            sqlx::query(
                "UPDATE node_pipeline_status SET status = 'STOPPED', message = NULL,
                    updated_at = $1 WHERE node_id = $2 AND pipeline_id = $3",
            )
            .bind(now)
            .bind(node_id)
            .bind(&pipeline_id)
            .execute(&mut *tx)
            .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
