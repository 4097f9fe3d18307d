//! Fetching what a stage's gates read: counter deltas of the canary nodes, the pipeline's
//! throughput over the bake, and PromQL answers. The verdicts are `vf_rules::gates`.

use std::collections::{BTreeMap, BTreeSet};

use vf_rules::{
    derive_status, offline, promql_queries, CanaryNodes, Gate, GateInputs, NodeContact, NodeCrash,
    NodeErrors, NodeStatus, OfflineDecision, PromQlOutcome,
};

use super::state::Release;
use crate::heartbeat::{minute_of, saturating_total};
use crate::promql::instant_query;
use crate::{Control, ControlError, Db, Doing, Result};

const MINUTE_MS: i64 = 60_000;

/// The gate inputs read from the database, each named in reasons, logs and `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateInput {
    ErrorCounts,
    Throughput,
    CanaryNodes,
}

impl GateInput {
    /// The `input` label of `vectorflow_gate_input_errors_total`.
    pub fn label(self) -> &'static str {
        match self {
            GateInput::ErrorCounts => "error_counts",
            GateInput::Throughput => "throughput",
            GateInput::CanaryNodes => "canary_nodes",
        }
    }

    fn description(self) -> &'static str {
        match self {
            GateInput::ErrorCounts => "canary nodes' error and event counters",
            GateInput::Throughput => "pipeline's throughput since the stage started",
            GateInput::CanaryNodes => "canary nodes' pipeline statuses",
        }
    }
}

/// A gate input that could not be read. The release cannot be judged: the scheduler holds it
/// with [`InputError::reason`], operator actions refuse with it; the cause chain goes to the
/// log only.
#[derive(Debug, thiserror::Error)]
#[error("the {} could not be read", .input.description())]
pub struct InputError {
    pub input: GateInput,
    #[source]
    pub cause: ControlError,
}

impl InputError {
    /// What an operator is told: which input failed, and where the details are.
    pub fn reason(&self, release_id: &str) -> String {
        format!(
            "gates not evaluated: {self} (the server log has the cause; search for release {release_id})"
        )
    }

    /// Logs the cause chain at error level and counts it; `consequence` says what happens to
    /// the release ("holding the release", "refusing the operator's action").
    pub fn report(&self, ctl: &Control, release_id: &str, consequence: &str) {
        tracing::error!(
            release_id,
            input = self.input.label(),
            error = self.cause.chain(),
            "gate inputs could not be read; {consequence}"
        );
        ctl.metrics.gate_input_error(self.input.label());
    }
}

fn input(input: GateInput) -> impl FnOnce(ControlError) -> InputError {
    move |cause| InputError { input, cause }
}

/// Error and event deltas per node of `nodes` running `version` from `since` on (whole
/// minutes: the minute the stage started counts), named, and marked when the current stage
/// added the node (`this_stage`). Nodes that reported nothing are absent.
pub async fn error_counts(
    db: &Db,
    pipeline_id: &str,
    version: i64,
    nodes: &BTreeSet<String>,
    this_stage: &BTreeSet<String>,
    since: i64,
) -> Result<Vec<NodeErrors>> {
    db.heartbeats.settled().await;
    let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(
        "SELECT m.node_id, COALESCE(n.name, m.node_id), m.errors, m.events_in
         FROM node_pipeline_metrics m LEFT JOIN nodes n ON n.id = m.node_id
         WHERE m.pipeline_id = $1 AND m.version = $2 AND m.minute >= $3",
    )
    .bind(pipeline_id)
    .bind(version)
    .bind(minute_of(since))
    .fetch_all(&db.pool)
    .await
    .doing(format!(
        "reading node_pipeline_metrics errors and events_in of pipeline {pipeline_id} v{version}"
    ))?;
    let mut per_node: BTreeMap<String, NodeErrors> = BTreeMap::new();
    for (id, name, errors, events_in) in rows {
        if !nodes.contains(&id) {
            continue;
        }
        let node = per_node.entry(id.clone()).or_insert_with(|| NodeErrors {
            node: name,
            this_stage: this_stage.contains(&id),
            errors: 0,
            events_in: 0,
        });
        node.errors = saturating_total([node.errors, errors]);
        node.events_in = saturating_total([node.events_in, events_in]);
    }
    Ok(per_node.into_values().collect())
}

/// Nodes [`canary_nodes`] names when too few applied.
const NAMED_NOT_APPLIED: usize = 5;

/// What the nodes of `targeted` report about `version` of the pipeline: how many run it, a
/// few that do not (with their status), and those that report it crashed.
pub async fn canary_nodes(
    db: &Db,
    pipeline_id: &str,
    version: i64,
    targeted: &BTreeSet<String>,
    now: i64,
) -> Result<CanaryNodes> {
    db.heartbeats.settled().await;
    let rows: Vec<CanaryRow> = sqlx::query_as(
        "SELECT s.node_id, COALESCE(n.name, s.node_id), s.version, s.status, s.failed_version,
            COALESCE(s.failed_reason, s.message)
         FROM node_pipeline_status s LEFT JOIN nodes n ON n.id = s.node_id
         WHERE s.pipeline_id = $1 AND (s.version = $2 OR s.failed_version = $2)",
    )
    .bind(pipeline_id)
    .bind(version)
    .fetch_all(&db.pool)
    .await
    .doing(format!(
        "reading node_pipeline_status of pipeline {pipeline_id} v{version}"
    ))?;
    let mut applied = BTreeSet::new();
    let mut crashed = Vec::new();
    for (node_id, name, running, status, failed, reason) in rows {
        if !targeted.contains(&node_id) {
            continue;
        }
        let runs = running == Some(version);
        if failed == Some(version) || (runs && status == "CRASHED") {
            crashed.push(NodeCrash {
                node: name,
                reason: reason.unwrap_or_else(|| "no message".into()),
            });
        } else if runs && status == "RUNNING" {
            applied.insert(node_id);
        }
    }
    let missing: Vec<&String> = (targeted.iter())
        .filter(|id| !applied.contains(*id))
        .take(NAMED_NOT_APPLIED)
        .collect();
    Ok(CanaryNodes {
        canary_version: version,
        targeted: targeted.len(),
        applied: applied.len(),
        not_applied: not_applied(db, pipeline_id, version, &missing, now).await?,
        crashed,
    })
}

type CanaryRow = (
    String,
    String,
    Option<i64>,
    String,
    Option<i64>,
    Option<String>,
);

/// Ids per statement when reading nodes by id.
const IDS_PER_STATEMENT: usize = 500;

/// When each of `ids` was last heard from, as the fleet views see it (the contacts not written
/// yet overlaid), and whether it was revoked. A deleted node has no row.
async fn node_contacts(db: &Db, ids: &BTreeSet<String>) -> Result<Vec<NodeContact>> {
    let ids: Vec<&String> = ids.iter().collect();
    let mut contacts = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_STATEMENT) {
        let statement = crate::sql!(
            "SELECT id, name, last_seen_at, poll_interval_ms, revoked_at FROM nodes
             WHERE id IN ({})",
            db.dialect.params(chunk.len(), 1)
        );
        let mut query = sqlx::query_as::<_, ContactRow>(statement);
        for id in chunk {
            query = query.bind(id.as_str());
        }
        let mut rows = query
            .fetch_all(&db.pool)
            .await
            .doing("reading when the targeted nodes were last seen")?;
        db.last_seen.overlay_by(&mut rows, |r| (&r.0, &mut r.2));
        contacts.extend(rows.into_iter().map(
            |(id, name, last_seen_at, poll_interval_ms, revoked_at)| NodeContact {
                id,
                name,
                last_seen_at,
                poll_interval_ms,
                revoked: revoked_at.is_some(),
            },
        ));
    }
    Ok(contacts)
}

type ContactRow = (String, String, Option<i64>, i64, Option<i64>);

/// `edge-7 UNREACHABLE`, `edge-9 runs v3 RUNNING`, `edge-2 has not reported the pipeline`.
async fn not_applied(
    db: &Db,
    pipeline_id: &str,
    version: i64,
    ids: &[&String],
    now: i64,
) -> Result<Vec<String>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let statement = crate::sql!(
        "SELECT n.id, n.name, n.last_seen_at, n.disconnected_at, n.poll_interval_ms, s.version,
            s.status
         FROM nodes n LEFT JOIN node_pipeline_status s
            ON s.node_id = n.id AND s.pipeline_id = {}
         WHERE n.id IN ({})",
        db.dialect.param(1),
        db.dialect.params(ids.len(), 2)
    );
    let mut query = sqlx::query_as::<_, NotAppliedRow>(statement).bind(pipeline_id);
    for id in ids {
        query = query.bind(id.as_str());
    }
    let mut rows = query.fetch_all(&db.pool).await.doing(format!(
        "reading the nodes of pipeline {pipeline_id} that have not applied v{version}"
    ))?;
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    // The contacts not written yet count, as in the fleet views: a node that polled a moment
    // ago is not UNKNOWN or UNREACHABLE here while the fleet page shows it healthy.
    db.last_seen.overlay_by(&mut rows, |r| (&r.0, &mut r.2));
    Ok(rows
        .into_iter()
        .map(
            |(_, name, last_seen, disconnected_at, poll_ms, running, status)| {
                let disconnected = crate::fleet::disconnected(disconnected_at, last_seen);
                let node = derive_status(now, last_seen, disconnected, poll_ms, &[]);
                match (node, running, status) {
                    (NodeStatus::Unreachable | NodeStatus::Unknown, _, _) => {
                        format!("{name} {}", node.as_str())
                    }
                    (_, Some(v), Some(status)) => format!("{name} runs v{v} {status}"),
                    _ => format!("{name} has not reported the pipeline"),
                }
            },
        )
        .collect())
}

type NotAppliedRow = (
    String,
    String,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
    Option<String>,
);

/// The pipeline's events so far in the minute `at` falls in (recorded when a stage starts).
pub async fn events_in_minute(db: &Db, pipeline_id: &str, at: i64) -> Result<i64> {
    let minute = minute_of(at);
    let (events, _) = events_in_minutes(db, pipeline_id, minute, minute + MINUTE_MS).await?;
    Ok(events)
}

/// The pipeline's per-minute `events_in` rollups with `from <= minute < until`, summed
/// without overflow (a database `SUM` fails on rows near `i64::MAX`), and how many rows.
pub async fn events_in_minutes(
    db: &Db,
    pipeline_id: &str,
    from: i64,
    until: i64,
) -> Result<(i64, usize)> {
    db.heartbeats.settled().await;
    let rows: Vec<i64> = sqlx::query_scalar(
        "SELECT events_in FROM pipeline_metrics
         WHERE pipeline_id = $1 AND minute >= $2 AND minute < $3",
    )
    .bind(pipeline_id)
    .bind(from)
    .bind(until)
    .fetch_all(&db.pool)
    .await
    .doing(format!(
        "reading pipeline_metrics.events_in of pipeline {pipeline_id} for minutes [{from}, {until})"
    ))?;
    Ok((saturating_total(rows.iter().copied()), rows.len()))
}

/// The pipeline's aggregate events/s from `since` to `now`: the rollups of every minute from
/// the one `since` falls in, less `before_since` (what that first minute had counted before
/// `since`), over the time since `since`. `None` when nothing was reported since `since`.
pub async fn throughput_eps(
    db: &Db,
    pipeline_id: &str,
    since: i64,
    before_since: i64,
    now: i64,
) -> Result<Option<f64>> {
    // Every minute from the one `since` falls in through the one `now` falls in.
    let (events, _) = events_in_minutes(
        db,
        pipeline_id,
        minute_of(since),
        minute_of(now) + MINUTE_MS,
    )
    .await?;
    let during = events.saturating_sub(before_since).max(0);
    let seconds = ((now - since) as f64 / 1000.0).max(1.0);
    Ok((during > 0).then(|| during as f64 / seconds))
}

/// What `gates` (those due for a check, or all of the stage's) read, read now: the canary
/// nodes' error counters only for an errorRate gate, the throughput only for a
/// throughputDrop gate, their PromQL queries; the canary nodes' reports (crashes, proof of
/// apply) always.
pub async fn gate_inputs<'g>(
    ctl: &Control,
    release: &Release,
    gates: impl IntoIterator<Item = &'g Gate>,
    now: i64,
) -> Result<GateInputs, InputError> {
    let Some(current) = release.state.current() else {
        return Ok(GateInputs::default());
    };
    let gates: Vec<&Gate> = gates.into_iter().collect();
    let needs = |kind: fn(&Gate) -> bool| gates.iter().any(|g| kind(g));
    let mut targeted = release.targeted();
    // Offline and departed nodes first: the stage's rule may leave them out of every count.
    let rule = release.plan().offline_rule(
        release.state.current_stage,
        ctl.settings.offline_nodes_default,
    );
    let contacts = node_contacts(&ctl.db, &targeted)
        .await
        .map_err(input(GateInput::CanaryNodes))?;
    let OfflineDecision {
        excluded,
        result: offline_result,
    } = offline::decide(&rule, &targeted, &contacts, now);
    targeted.retain(|id| !excluded.contains(id));
    let mut counts = Vec::new();
    if needs(|g| matches!(g, Gate::ErrorRate { .. })) {
        let this_stage: BTreeSet<String> = (current.node_ids.iter())
            .filter(|id| targeted.contains(*id))
            .cloned()
            .collect();
        counts = error_counts(
            &ctl.db,
            &release.pipeline_id,
            release.canary_version,
            &targeted,
            &this_stage,
            current.started_at,
        )
        .await
        .map_err(input(GateInput::ErrorCounts))?;
    }
    let mut current_eps = None;
    if needs(|g| matches!(g, Gate::ThroughputDrop { .. })) {
        current_eps = throughput_eps(
            &ctl.db,
            &release.pipeline_id,
            current.started_at,
            current.start_minute_events,
            now,
        )
        .await
        .map_err(input(GateInput::Throughput))?;
    }
    let canary = canary_nodes(
        &ctl.db,
        &release.pipeline_id,
        release.canary_version,
        &targeted,
        now,
    )
    .await
    .map_err(input(GateInput::CanaryNodes))?;
    let mut inputs = GateInputs {
        canary: Some(canary),
        error_counts: (!counts.is_empty()).then_some(counts),
        baseline_eps: release.baseline_eps,
        current_eps,
        bake_remaining_ms: (current.bake_deadline - now).max(0),
        offline: offline_result,
        ..GateInputs::default()
    };
    for query in promql_queries(gates.iter().copied()) {
        let outcome = match &ctl.settings.prometheus {
            Some(settings) => instant_query(&ctl.http, settings, query).await,
            None => PromQlOutcome::Other("VF_PROMETHEUS_URL is not set".into()),
        };
        inputs.promql.insert(query.to_string(), outcome);
    }
    Ok(inputs)
}
