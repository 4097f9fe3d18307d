//! Fetching what a stage's gates read: counter deltas of the canary nodes, the pipeline's
//! throughput over the bake, and PromQL answers. The verdicts are `vf_rules::gates`.

use std::collections::BTreeSet;

use vf_rules::{promql_queries, ErrorCounts, GateInputs, PromQlOutcome};

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
}

impl GateInput {
    /// The `input` label of `vectorflow_gate_input_errors_total`.
    pub fn label(self) -> &'static str {
        match self {
            GateInput::ErrorCounts => "error_counts",
            GateInput::Throughput => "throughput",
        }
    }

    fn description(self) -> &'static str {
        match self {
            GateInput::ErrorCounts => "canary nodes' error and event counters",
            GateInput::Throughput => "pipeline's throughput since the stage started",
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

/// Error and event deltas of `nodes` running `version` from `since` on (whole minutes: the
/// minute the stage started counts).
pub async fn error_counts(
    db: &Db,
    pipeline_id: &str,
    version: i64,
    nodes: &BTreeSet<String>,
    since: i64,
) -> Result<ErrorCounts> {
    db.heartbeats.settled().await;
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT node_id, errors, events_in FROM node_pipeline_metrics
         WHERE pipeline_id = $1 AND version = $2 AND minute >= $3",
    )
    .bind(pipeline_id)
    .bind(version)
    .bind(minute_of(since))
    .fetch_all(&db.pool)
    .await
    .doing(format!(
        "reading node_pipeline_metrics errors and events_in of pipeline {pipeline_id} v{version}"
    ))?;
    let targeted = || rows.iter().filter(|(node, _, _)| nodes.contains(node));
    Ok(ErrorCounts {
        errors: saturating_total(targeted().map(|(_, errors, _)| *errors)),
        events_in: saturating_total(targeted().map(|(_, _, events)| *events)),
    })
}

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

/// Everything the current stage's gates need, read now.
pub async fn gate_inputs(
    ctl: &Control,
    release: &Release,
    now: i64,
) -> Result<GateInputs, InputError> {
    let plan = release.plan();
    let index = release.state.current_stage;
    let Some(current) = release.state.current() else {
        return Ok(GateInputs::default());
    };
    let targeted = release.targeted();
    let counts = error_counts(
        &ctl.db,
        &release.pipeline_id,
        release.canary_version,
        &targeted,
        current.started_at,
    )
    .await
    .map_err(input(GateInput::ErrorCounts))?;
    let current_eps = throughput_eps(
        &ctl.db,
        &release.pipeline_id,
        current.started_at,
        current.start_minute_events,
        now,
    )
    .await
    .map_err(input(GateInput::Throughput))?;
    let mut inputs = GateInputs {
        error_counts: Some(counts),
        baseline_eps: release.baseline_eps,
        current_eps,
        bake_remaining_ms: (current.bake_deadline - now).max(0),
        ..GateInputs::default()
    };
    if let Some(stage) = plan.stage(index) {
        for query in promql_queries(&stage.gates) {
            let outcome = match &ctl.settings.prometheus {
                Some(settings) => instant_query(&ctl.http, settings, query).await,
                None => PromQlOutcome::Other("VF_PROMETHEUS_URL is not set".into()),
            };
            inputs.promql.insert(query.to_string(), outcome);
        }
    }
    Ok(inputs)
}
