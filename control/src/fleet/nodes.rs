//! Nodes: one agent in one environment.

use serde_json::json;

use super::environments::Environment;
use super::labels::{self, parse_labels, Labels};
use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::db::BulkRow;
use crate::ids::new_id;
use crate::revoke::{self, Revocable};
use crate::{ControlError, Db, Result};
use vf_rules::{derive_status, NodeRef, NodeStatus};

/// A node as stored. Its fields are [`NODE_COLUMNS`] in order (a SQLite bulk read decodes them
/// by position).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct NodeRow {
    pub id: String,
    pub environment_id: String,
    pub kind: String,
    pub name: String,
    pub hostname: String,
    pub os: Option<String>,
    pub agent_version: Option<String>,
    pub vector_version: Option<String>,
    pub reported_labels: String,
    pub operator_labels: String,
    pub poll_interval_ms: i64,
    pub enrolled_at: i64,
    pub last_seen_at: Option<i64>,
    pub disconnected_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

pub(crate) const NODE_COLUMNS: &str =
    "id, environment_id, kind, name, hostname, os, agent_version, \
    vector_version, reported_labels, operator_labels, poll_interval_ms, enrolled_at, \
    last_seen_at, disconnected_at, revoked_at";

impl NodeRow {
    /// The labels selection uses: what the agent reports, overridden by what operators set.
    pub fn labels(&self) -> Labels {
        merged_labels(&self.reported_labels, &self.operator_labels)
    }

    pub fn operator_labels(&self) -> Labels {
        labels::from_json(&self.operator_labels)
    }

    pub fn is_disconnected(&self) -> bool {
        disconnected(self.disconnected_at, self.last_seen_at)
    }
}

/// Whether the node's last disconnect came after its last contact.
pub(crate) fn disconnected(disconnected_at: Option<i64>, last_seen_at: Option<i64>) -> bool {
    matches!((disconnected_at, last_seen_at), (Some(d), Some(s)) if d >= s)
}

/// A node to enroll, as its protocol describes it (already checked or cleaned by that path).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewNode<'a> {
    /// `vf-agent` or `otel-collector`.
    pub kind: &'static str,
    pub name: &'a str,
    pub hostname: &'a str,
    pub os: Option<&'a str>,
    pub agent_version: Option<&'a str>,
    pub vector_version: Option<&'a str>,
    pub labels: &'a Labels,
    pub credential: Credential<'a>,
    pub poll_interval_ms: i64,
}

/// How an enrolled node is known afterwards; the two agent protocols differ here.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Credential<'a> {
    /// vf-agent: the hash of the node token it was handed. Every enrollment is a new node.
    NodeTokenHash(&'a str),
    /// OpAMP: its instance uid (lowercase hex). A uid already registered (a replica racing
    /// on the same first contact) enrolls nothing, and the audit entry names kind and uid.
    InstanceUid(&'a str),
}

/// Enrolls a node in `env`, whose enrollment token the caller has checked: the node row and
/// its `node.enroll` audit entry, in one transaction. Returns the new node's id, or `None`
/// when the instance uid was already registered.
pub(crate) async fn enroll_node(
    db: &Db,
    env: &Environment,
    node: NewNode<'_>,
    now: i64,
) -> Result<Option<String>> {
    let (token_hash, instance_uid) = match node.credential {
        Credential::NodeTokenHash(hash) => (Some(hash), None),
        Credential::InstanceUid(uid) => (None, Some(uid)),
    };
    let node_id = new_id();
    let mut tx = audit::begin(db).await?;
    // Only a uid can conflict: NULLs (every vf-agent's uid) never do.
    let inserted = sqlx::query(
        "INSERT INTO nodes (id, environment_id, kind, name, hostname, os, agent_version,
            vector_version, reported_labels, token_hash, instance_uid, poll_interval_ms,
            enrolled_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
         ON CONFLICT (instance_uid) DO NOTHING",
    )
    .bind(&node_id)
    .bind(&env.id)
    .bind(node.kind)
    .bind(node.name)
    .bind(node.hostname)
    .bind(node.os)
    .bind(node.agent_version)
    .bind(node.vector_version)
    .bind(serde_json::to_string(node.labels)?)
    .bind(token_hash)
    .bind(instance_uid)
    .bind(node.poll_interval_ms)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 0 {
        return Ok(None); // nothing written: dropping the transaction rolls back nothing
    }
    let details = match node.credential {
        Credential::NodeTokenHash(_) => {
            json!({ "hostname": node.hostname, "labels": node.labels })
        }
        Credential::InstanceUid(uid) => json!({
            "kind": node.kind,
            "instanceUid": uid,
            "hostname": node.hostname,
            "labels": node.labels,
        }),
    };
    tx.commit(
        now,
        AuditEntry {
            actor: &Actor::system(&format!("node:{node_id}")),
            action: AuditAction::NodeEnroll,
            target_id: &node_id,
            environment_id: Some(&env.id),
            details,
        },
    )
    .await?;
    Ok(Some(node_id))
}

/// One node's report for one pipeline (NodePipelineStatus). Its fields are
/// [`STATUS_COLUMNS`] in order.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct PipelineStatusRow {
    pub node_id: String,
    pub pipeline_id: String,
    pub version: Option<i64>,
    pub status: String,
    pub events_in: i64,
    pub events_out: i64,
    pub errors_total: i64,
    pub events_discarded: i64,
    pub bytes_in: i64,
    pub bytes_out: i64,
    pub uptime_seconds: Option<i64>,
    pub pid: Option<i64>,
    pub config_checksum: Option<String>,
    pub message: Option<String>,
    pub updated_at: i64,
}

pub(crate) const STATUS_COLUMNS: &str = "node_id, pipeline_id, version, status, events_in, \
    events_out, errors_total, events_discarded, bytes_in, bytes_out, uptime_seconds, pid, \
    config_checksum, message, updated_at";

/// A node with everything the fleet view shows.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub node: NodeRow,
    pub labels: Labels,
    pub status: NodeStatus,
    pub pipelines: Vec<PipelineStatusRow>,
}

/// An environment's live nodes by name (then id, compared as bytes on both databases), with
/// contacts not written yet applied. One bulk read ([`Db::bulk_rows`]): this is the
/// whole fleet for every view.
pub async fn list_nodes(db: &Db, environment_id: &str) -> Result<Vec<NodeRow>> {
    let mut nodes: Vec<NodeRow> = live_nodes(db, NODE_COLUMNS, environment_id).await?;
    nodes.sort_unstable_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    db.last_seen.overlay(&mut nodes);
    Ok(nodes)
}

/// `columns` of an environment's live (unrevoked) nodes, in one bulk read, in no set order.
async fn live_nodes<T: BulkRow>(db: &Db, columns: &str, environment_id: &str) -> Result<Vec<T>> {
    let select =
        format!("SELECT {columns} FROM nodes WHERE environment_id = $1 AND revoked_at IS NULL");
    db.bulk_rows(columns, &select, environment_id).await
}

/// `columns` (comma-separated) of the reports of an environment's nodes, in one bulk read,
/// in no set order: the reports of the environment's pipelines, which are exactly those (a
/// heartbeat's reports of other pipelines are ignored, OpAMP reports what it was offered, and
/// nodes and pipelines never change environment). Filtering by pipeline needs no join with
/// the 100,000 rows of `nodes`.
async fn environment_reports<T: BulkRow>(
    db: &Db,
    columns: &str,
    environment_id: &str,
) -> Result<Vec<T>> {
    db.heartbeats.settled().await;
    let select = format!(
        "SELECT {columns} FROM node_pipeline_status
         WHERE pipeline_id IN (SELECT id FROM pipelines WHERE environment_id = $1)"
    );
    db.bulk_rows(columns, &select, environment_id).await
}

/// [`environment_reports`] started on a task of its own. A whole-fleet read spends most of
/// its time decoding rows on the thread that polls it, and one task polls everything it
/// joins on one thread: a view reads its nodes meanwhile, so the two decode on two threads.
fn environment_reports_beside<T: BulkRow + 'static>(
    db: &Db,
    columns: &'static str,
    environment_id: &str,
) -> tokio::task::JoinHandle<Result<Vec<T>>> {
    let (db, environment_id) = (db.clone(), environment_id.to_string());
    tokio::spawn(async move { environment_reports(&db, columns, &environment_id).await })
}

/// The result of a read started by [`environment_reports_beside`].
async fn joined<T>(task: tokio::task::JoinHandle<Result<T>>) -> Result<T> {
    task.await.map_err(|e| ControlError::Internal(e.into()))?
}

/// The labels selection uses, from the two stored JSON columns: what the agent reports,
/// overridden by what operators set.
fn merged_labels(reported: &str, operator: &str) -> Labels {
    let mut merged = labels::from_json(reported);
    merged.extend(labels::from_json(operator));
    merged
}

/// An environment's live nodes as selection sees them (id and labels), in no set order:
/// three columns instead of a whole row, for creating a release or opening a stage over a
/// large fleet.
pub async fn list_node_refs(db: &Db, environment_id: &str) -> Result<Vec<NodeRef>> {
    let rows: Vec<(String, String, String)> =
        live_nodes(db, "id, reported_labels, operator_labels", environment_id).await?;
    Ok(rows
        .into_iter()
        .map(|(id, reported, operator)| NodeRef {
            labels: merged_labels(&reported, &operator),
            id,
        })
        .collect())
}

/// One node, with contacts not written yet applied.
pub async fn get_node(db: &Db, id: &str) -> Result<NodeRow> {
    let mut node = sqlx::query_as::<_, NodeRow>(crate::sql!(
        "SELECT {NODE_COLUMNS} FROM nodes WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("node {id}")))?;
    db.last_seen.overlay(std::slice::from_mut(&mut node));
    Ok(node)
}

/// The fleet view of an environment: nodes with labels, derived status and pipeline reports.
pub async fn fleet(db: &Db, environment_id: &str, now: i64) -> Result<Vec<NodeView>> {
    let statuses =
        environment_reports_beside::<PipelineStatusRow>(db, STATUS_COLUMNS, environment_id);
    let nodes = list_nodes(db, environment_id).await?;
    let mut statuses = joined(statuses).await?;
    statuses.sort_unstable_by(|a, b| a.pipeline_id.cmp(&b.pipeline_id));
    let mut by_node: std::collections::HashMap<String, Vec<PipelineStatusRow>> =
        std::collections::HashMap::new();
    for s in statuses {
        by_node.entry(s.node_id.clone()).or_default().push(s);
    }
    Ok(nodes
        .into_iter()
        .map(|node| {
            let pipelines = by_node.remove(&node.id).unwrap_or_default();
            NodeView::new(node, pipelines, now)
        })
        .collect())
}

impl NodeView {
    /// `node` with its reports, its status derived as of `now`.
    fn new(node: NodeRow, pipelines: Vec<PipelineStatusRow>, now: i64) -> NodeView {
        let status = node_status(
            now,
            node.last_seen_at,
            node.is_disconnected(),
            node.poll_interval_ms,
            pipelines.iter().map(|p| (p.updated_at, p.status.as_str())),
        );
        NodeView {
            labels: node.labels(),
            status,
            pipelines,
            node,
        }
    }
}

/// One node as its own page shows it: the fleet view's row, and what its agent last said of
/// the host and of itself (JSON as reported, `None` before any).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDetail {
    pub view: NodeView,
    pub host_metrics: Option<String>,
    pub agent_report: Option<String>,
    /// Per pipeline id, the `componentMetrics` of its latest report (JSON as reported).
    pub component_metrics: std::collections::BTreeMap<String, String>,
}

/// The node `id` (revoked ones too: their page says so), as of `now`: its row with what it
/// reported of itself in one read, then its reports.
pub async fn node_detail(db: &Db, id: &str, now: i64) -> Result<NodeDetail> {
    #[derive(sqlx::FromRow)]
    struct WithReports {
        #[sqlx(flatten)]
        node: NodeRow,
        host_metrics: Option<String>,
        agent_report: Option<String>,
    }
    db.heartbeats.settled().await;
    let mut row = sqlx::query_as::<_, WithReports>(crate::sql!(
        "SELECT {NODE_COLUMNS}, host_metrics, agent_report FROM nodes WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("node {id}")))?;
    db.last_seen.overlay(std::slice::from_mut(&mut row.node));
    #[derive(sqlx::FromRow)]
    struct WithMetrics {
        #[sqlx(flatten)]
        status: PipelineStatusRow,
        component_metrics: Option<String>,
    }
    let rows: Vec<WithMetrics> = sqlx::query_as(crate::sql!(
        "SELECT {STATUS_COLUMNS}, component_metrics FROM node_pipeline_status WHERE node_id = $1"
    ))
    .bind(id)
    .fetch_all(&db.pool)
    .await?;
    let component_metrics = rows
        .iter()
        .filter_map(|r| Some((r.status.pipeline_id.clone(), r.component_metrics.clone()?)))
        .collect();
    let mut pipelines: Vec<PipelineStatusRow> = rows.into_iter().map(|r| r.status).collect();
    // Sorted here, as the fleet view sorts: the same order on both databases.
    pipelines.sort_unstable_by(|a, b| a.pipeline_id.cmp(&b.pipeline_id));
    Ok(NodeDetail {
        view: NodeView::new(row.node, pipelines, now),
        host_metrics: row.host_metrics,
        agent_report: row.agent_report,
        component_metrics,
    })
}

/// A node as one pipeline's views show it: who it is, its status, and its latest report of
/// that pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineNode {
    pub id: String,
    pub name: String,
    /// The labels selection uses, shared by every node with the same ones.
    pub labels: std::sync::Arc<Labels>,
    pub status: NodeStatus,
    pub report: Option<Report>,
}

/// What a node last reported of one pipeline, as the pipeline's views show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub version: Option<i64>,
    pub status: String,
    pub events_in: i64,
    pub errors_total: i64,
}

/// The columns of a node a pipeline view reads, in order.
#[derive(sqlx::FromRow, serde::Deserialize)]
struct BriefRow {
    id: String,
    name: String,
    reported_labels: String,
    operator_labels: String,
    poll_interval_ms: i64,
    last_seen_at: Option<i64>,
    disconnected_at: Option<i64>,
}

/// The columns of a report a pipeline view reads, in order.
#[derive(sqlx::FromRow, serde::Deserialize)]
struct BriefReport {
    node_id: String,
    pipeline_id: String,
    updated_at: i64,
    version: Option<i64>,
    status: String,
    events_in: i64,
    errors_total: i64,
}

/// What one node reported, gathered for [`pipeline_nodes`]: its report of the pipeline,
/// and every report's `(updated_at, status)`.
#[derive(Clone, Default)]
struct Reported<'a> {
    this_pipeline: Option<&'a BriefReport>,
    statuses: Vec<(i64, &'a str)>,
}

/// The environment's live nodes as the views of `pipeline_id` show them, by name (as
/// [`list_nodes`]): [`fleet`] without what only the fleet page shows, in two bulk reads of
/// seven columns. Each distinct pair of label columns is parsed once and the merged labels
/// shared (fleets repeat a few label sets across many nodes, and a parsed map costs far
/// more memory than its text).
pub async fn pipeline_nodes(
    db: &Db,
    environment_id: &str,
    pipeline_id: &str,
    now: i64,
) -> Result<Vec<PipelineNode>> {
    use std::collections::HashMap;
    use std::sync::Arc;
    // Two statements, read side by side: nodes, and the reports of the environment's nodes.
    let reports = environment_reports_beside::<BriefReport>(
        db,
        "node_id, pipeline_id, updated_at, version, status, events_in, errors_total",
        environment_id,
    );
    let mut rows: Vec<BriefRow> = live_nodes(
        db,
        "id, name, reported_labels, operator_labels, poll_interval_ms, last_seen_at, \
         disconnected_at",
        environment_id,
    )
    .await?;
    let reports = joined(reports).await?;
    rows.sort_unstable_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    db.last_seen
        .overlay_by(&mut rows, |r| (&r.id, &mut r.last_seen_at));
    // Per node: the report of this pipeline, and the fresh reports' statuses.
    let index: HashMap<&str, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_str(), i))
        .collect();
    let mut reported: Vec<Reported> = vec![Reported::default(); rows.len()];
    for r in &reports {
        if let Some(&i) = index.get(r.node_id.as_str()) {
            let slot = &mut reported[i];
            if r.pipeline_id == pipeline_id {
                slot.this_pipeline = Some(r);
            }
            slot.statuses.push((r.updated_at, r.status.as_str()));
        }
    }
    drop(index);
    let mut label_sets: HashMap<(String, String), Arc<Labels>> = HashMap::new();
    Ok(rows
        .into_iter()
        .zip(reported)
        .map(|(row, reported)| PipelineNode {
            status: node_status(
                now,
                row.last_seen_at,
                disconnected(row.disconnected_at, row.last_seen_at),
                row.poll_interval_ms,
                reported.statuses.into_iter(),
            ),
            report: reported.this_pipeline.map(|r| Report {
                version: r.version,
                status: r.status.clone(),
                events_in: r.events_in,
                errors_total: r.errors_total,
            }),
            labels: label_sets
                .entry((row.reported_labels, row.operator_labels))
                .or_insert_with_key(|(reported, operator)| {
                    Arc::new(merged_labels(reported, operator))
                })
                .clone(),
            name: row.name,
            id: row.id,
        })
        .collect())
}

/// A node's status from its contacts and its reports (each `(updated_at, status)`). Only
/// what the latest heartbeat reported counts: an agent reports a removed pipeline STOPPED
/// once and then no more, which must not degrade it for ever.
fn node_status<'a>(
    now: i64,
    last_seen_at: Option<i64>,
    disconnected: bool,
    poll_interval_ms: i64,
    reports: impl Iterator<Item = (i64, &'a str)>,
) -> NodeStatus {
    let fresh_since = last_seen_at.unwrap_or(0) - poll_interval_ms;
    let fresh: Vec<&str> = reports
        .filter(|(updated_at, _)| *updated_at >= fresh_since)
        .map(|(_, status)| status)
        .collect();
    derive_status(now, last_seen_at, disconnected, poll_interval_ms, &fresh)
}

/// Operators set labels that win over what the agent reports.
pub async fn set_operator_labels(
    db: &Db,
    actor: &Actor,
    node_id: &str,
    labels: Labels,
    now: i64,
) -> Result<NodeRow> {
    let labels = parse_labels("labels", labels)?;
    let node = get_node(db, node_id).await?;
    let mut tx = audit::begin(db).await?;
    sqlx::query("UPDATE nodes SET operator_labels = $1 WHERE id = $2")
        .bind(labels::to_json(&labels))
        .bind(node_id)
        .execute(&mut *tx)
        .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::NodeLabels,
            target_id: node_id,
            environment_id: Some(&node.environment_id),
            details: json!({ "before": node.operator_labels(), "after": labels }),
        },
    )
    .await?;
    get_node(db, node_id).await
}

/// Revokes a node: its token stops working at once (the next poll gets 401) and it leaves
/// the fleet view and every release's fleet. Already revoked is 409 and changes and records
/// nothing.
pub async fn revoke_node(db: &Db, actor: &Actor, node_id: &str, now: i64) -> Result<()> {
    let node = get_node(db, node_id).await?;
    if node.revoked_at.is_some() {
        return Err(Revocable::Node.already());
    }
    let mut tx = audit::begin(db).await?;
    revoke::once(&mut tx, Revocable::Node, node_id, now).await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::NodeRevoke,
            target_id: node_id,
            environment_id: Some(&node.environment_id),
            details: json!({ "name": node.name, "kind": node.kind }),
        },
    )
    .await?;
    Ok(())
}
