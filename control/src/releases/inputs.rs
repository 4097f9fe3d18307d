//! Fetching what a stage's gates read: counter deltas of the canary nodes, the pipeline's
//! throughput over the bake, and PromQL answers. The verdicts are `vf_rules::gates`.

use std::collections::BTreeSet;

use vf_rules::{promql_queries, ErrorCounts, GateInputs, PromQlOutcome, RolloutPlan};

use super::state::ReleaseRow;
use crate::heartbeat::minute_of;
use crate::promql::instant_query;
use crate::{Control, Db, Result};

/// Error and event deltas of `nodes` running `version` from `since` on (whole minutes: the
/// minute the stage started counts).
pub async fn error_counts(
    db: &Db,
    pipeline_id: &str,
    version: i64,
    nodes: &BTreeSet<String>,
    since: i64,
) -> Result<ErrorCounts> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT node_id, errors, events_in FROM node_pipeline_metrics
         WHERE pipeline_id = $1 AND version = $2 AND minute >= $3",
    )
    .bind(pipeline_id)
    .bind(version)
    .bind(minute_of(since))
    .fetch_all(&db.pool)
    .await?;
    let (errors, events_in) = rows
        .iter()
        .filter(|(node, _, _)| nodes.contains(node))
        .fold((0i64, 0i64), |(e, i), (_, errors, events)| {
            (e.saturating_add(*errors), i.saturating_add(*events))
        });
    Ok(ErrorCounts { errors, events_in })
}

/// The pipeline's events so far in the minute `at` falls in (recorded when a stage starts).
pub async fn events_in_minute(db: &Db, pipeline_id: &str, at: i64) -> Result<i64> {
    let events: Option<i64> = sqlx::query_scalar(
        "SELECT events_in FROM pipeline_metrics WHERE pipeline_id = $1 AND minute = $2",
    )
    .bind(pipeline_id)
    .bind(minute_of(at))
    .fetch_optional(&db.pool)
    .await?;
    Ok(events.unwrap_or(0))
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
    let events: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(events_in), 0) AS BIGINT)
         FROM pipeline_metrics WHERE pipeline_id = $1 AND minute >= $2 AND minute <= $3",
    )
    .bind(pipeline_id)
    .bind(minute_of(since))
    .bind(minute_of(now))
    .fetch_one(&db.pool)
    .await?;
    let during = events.saturating_sub(before_since).max(0);
    let seconds = ((now - since) as f64 / 1000.0).max(1.0);
    Ok((during > 0).then(|| during as f64 / seconds))
}

/// Everything the current stage's gates need, read now.
pub async fn gate_inputs(
    ctl: &Control,
    release: &ReleaseRow,
    plan: &RolloutPlan,
    now: i64,
) -> Result<GateInputs> {
    let stages = release.stage_states();
    let index = usize::try_from(release.current_stage).unwrap_or(0);
    let Some(current) = stages.get(index) else {
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
    .await?;
    let current_eps = throughput_eps(
        &ctl.db,
        &release.pipeline_id,
        current.started_at,
        current.start_minute_events,
        now,
    )
    .await?;
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
