//! `release.canary.create`: mint the canary version, record the previous one, capture the
//! throughput baseline and open stage 1, in one transaction.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use vf_rules::freeze::Change;
use vf_rules::{parse_canary_selector, preflight, Gate, ReleaseState, RolloutPlan};

use super::state::{get_release, Release};
use super::targets::{selector_field, FleetSnapshot};
use super::transition::opening;
use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::freeze::{freeze_override, hold_of, refuse_in};
use crate::heartbeat::minute_of;
use crate::ids::new_id;
use crate::pipelines::{
    claim_pipeline, get_pipeline, insert_version, parse_config, refuse_if_release_in_flight,
};
use crate::promql::instant_query;
use crate::{Control, ControlError, Db, Result};

/// The throughput baseline window before a rollout starts.
pub const BASELINE_WINDOW_MS: i64 = 5 * 60_000;
/// Health-check window of a plan-less canary when none is given.
pub const DEFAULT_HEALTH_CHECK_MINUTES: u32 = 5;

/// What `release.canary.create` takes. Exactly one of `rollout_plan` (progressive) or
/// `canary_selector` (plan-less) is given.
#[derive(Debug, Clone, Default)]
pub struct CanaryRequest {
    pub pipeline_id: String,
    pub config_yaml: String,
    pub changelog: String,
    pub rollout_plan: Option<Value>,
    pub canary_selector: Option<Value>,
    pub health_check_window_minutes: Option<i64>,
    /// An id chosen in advance (the deploy dialog previews percentage stages with it, since
    /// ranking depends on the release id); a fresh one when absent.
    pub release_id: Option<String>,
    /// An admin's reason for creating the release during a freeze window (the caller
    /// checked the role); refused without one while the environment is frozen.
    pub freeze_override: Option<String>,
}

fn plan_error(e: vf_rules::PlanError) -> ControlError {
    ControlError::invalid(format!("rolloutPlan.{}", e.field), e.message)
}

/// Parses the request's plan (or plan-less shape) and refuses what this server cannot run.
fn parse_plan(ctl: &Control, req: &CanaryRequest) -> Result<(RolloutPlan, bool)> {
    let (plan, planless) = match (&req.rollout_plan, &req.canary_selector) {
        (Some(_), Some(_)) => {
            return Err(ControlError::invalid(
                "rolloutPlan",
                "give either rolloutPlan or canarySelector, not both",
            ))
        }
        (None, None) => {
            return Err(ControlError::invalid(
                "rolloutPlan",
                "a canary needs a rolloutPlan or a canarySelector",
            ))
        }
        (Some(plan), None) => (RolloutPlan::parse(plan).map_err(plan_error)?, false),
        (None, Some(selector)) => {
            let selector = parse_canary_selector(selector, "canarySelector")
                .map_err(|e| ControlError::invalid(e.field, e.message))?;
            let minutes = match req.health_check_window_minutes {
                None => DEFAULT_HEALTH_CHECK_MINUTES,
                Some(m) => u32::try_from(m).map_err(|_| {
                    ControlError::invalid("healthCheckWindowMinutes", "must be between 1 and 1440")
                })?,
            };
            let plan = RolloutPlan::planless(selector, minutes)
                .map_err(|e| ControlError::invalid(e.field, e.message))?;
            (plan, true)
        }
    };
    if ctl.settings.prometheus.is_none() {
        for (i, stage) in plan.stages().iter().enumerate() {
            if let Some(j) = stage
                .gates
                .iter()
                .position(|g| matches!(g, Gate::CustomPromQl { .. }))
            {
                return Err(ControlError::invalid(
                    format!("rolloutPlan.stages[{i}].gates[{j}].customPromQL"),
                    "PromQL gates need VF_PROMETHEUS_URL, which this server does not have",
                ));
            }
        }
    }
    Ok((plan, planless))
}

/// Runs each `customPromQL` query of the plan once and refuses the plan, naming the query's
/// field, when one does not yield exactly one number now (a typo, a label that matches
/// several series, a Prometheus that cannot be reached): better said at create than found
/// at the first check.
async fn preflight_promql(ctl: &Control, plan: &RolloutPlan) -> Result<()> {
    let Some(settings) = &ctl.settings.prometheus else {
        return Ok(());
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, stage) in plan.stages().iter().enumerate() {
        for (j, gate) in stage.gates.iter().enumerate() {
            let Gate::CustomPromQl { query, .. } = gate else {
                continue;
            };
            if seen.contains(&query.as_str()) {
                continue;
            }
            seen.push(query);
            let outcome = instant_query(&ctl.http, settings, query).await;
            if let Err(what) = preflight(&outcome) {
                return Err(ControlError::invalid(
                    format!("rolloutPlan.stages[{i}].gates[{j}].customPromQL.query"),
                    what,
                ));
            }
        }
    }
    Ok(())
}

/// The pipeline's aggregate events per second over the five minutes before `now`; `None`
/// when no rollups exist in that window (the throughputDrop gate then skips).
pub async fn baseline_eps(db: &Db, pipeline_id: &str, now: i64) -> Result<Option<f64>> {
    let (events, rows) = super::inputs::events_in_minutes(
        db,
        pipeline_id,
        minute_of(now) - BASELINE_WINDOW_MS,
        minute_of(now),
    )
    .await?;
    Ok((rows > 0).then(|| events as f64 / (BASELINE_WINDOW_MS as f64 / 1000.0)))
}

/// Creates a canary release and opens its first stage.
pub async fn create_canary(ctl: &Control, actor: &Actor, req: CanaryRequest) -> Result<Release> {
    let db = &ctl.db;
    let now = ctl.now();
    let (plan, planless) = parse_plan(ctl, &req)?;
    let config = parse_config(&req.config_yaml)?;
    if req.changelog.len() > 4000 {
        return Err(ControlError::invalid(
            "changelog",
            "at most 4000 characters",
        ));
    }
    let pipeline = get_pipeline(db, &req.pipeline_id).await?;
    crate::config_check::refuse_identical(db, &pipeline, &config).await?;
    refuse_if_release_in_flight(&db.pool, &pipeline.id, "create a canary").await?;
    let freeze_override = (req.freeze_override.as_deref())
        .map(|r| freeze_override(Some(r)))
        .transpose()?;
    (hold_of(db, &pipeline.environment_id, now).await?)
        .allow(Change::NewRelease, freeze_override.is_some())?;
    // Prometheus and the validator command run last: a refusal that needs neither comes first.
    preflight_promql(ctl, &plan).await?;
    crate::config_check::validate(ctl.settings.config_validator.as_ref(), &config).await?;

    let snapshot = FleetSnapshot::read(db, &pipeline).await?;
    let release_id = match &req.release_id {
        None => new_id(),
        Some(id) => uuid::Uuid::parse_str(id)
            .map(|u| u.to_string())
            .map_err(|_| ControlError::invalid("releaseId", "must be a UUID"))?,
    };
    // Stage 1 opens now; every later stage's node group must exist now too.
    let first = snapshot.additions(&release_id, &plan, planless, 0, &BTreeSet::new())?;
    if first.is_empty() {
        return Err(ControlError::invalid(
            selector_field(planless, 0),
            "targets no node of the pipeline's fleet: a canary needs at least one node",
        ));
    }
    // (Only a node group can fail to resolve: percentages and labels always select.)
    for (i, stage) in plan.stages().iter().enumerate().skip(1) {
        if matches!(stage.selector, vf_rules::Selector::NodeGroup(_)) {
            snapshot.targets(&release_id, &stage.selector, &selector_field(planless, i))?;
        }
    }
    let opened = opening(ctl, &pipeline, first, now).await?;
    let stage_nodes = opened.node_ids.clone();
    let plan_json = plan.to_json();
    let state = ReleaseState::open(plan, planless, opened, now);
    let baseline = baseline_eps(db, &pipeline.id, now).await?;

    let mut tx = audit::begin(db).await?;
    // The previous version recorded below must still be the deployed one at commit.
    claim_pipeline(&mut tx, &pipeline.id, pipeline.row_version).await?;
    // The line may have stopped, or a freeze opened, since the check above.
    refuse_in(
        &mut tx,
        &pipeline.environment_id,
        Change::NewRelease,
        freeze_override.is_some(),
        now,
    )
    .await?;
    let canary_version = insert_version(
        &mut tx,
        &pipeline.id,
        &config,
        req.changelog.trim(),
        &actor.name,
        now,
    )
    .await?;
    let inserted = sqlx::query(
        "INSERT INTO releases (id, pipeline_id, canary_version, previous_version, status, plan,
            planless, stages, current_stage, bake_deadline, baseline_eps, created_by, updated_by,
            created_at, updated_at, next_check_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $13, $14)",
    )
    .bind(&release_id)
    .bind(&pipeline.id)
    .bind(canary_version)
    .bind(pipeline.deployed_version)
    .bind(state.status.as_str())
    .bind(plan_json.to_string())
    .bind(i64::from(state.planless))
    .bind(serde_json::to_string(&state.stages)?)
    .bind(state.current_stage as i64)
    .bind(state.bake_deadline)
    .bind(baseline)
    .bind(&actor.name)
    .bind(now)
    .bind(state.next_check_at())
    .execute(&mut *tx)
    .await;
    if let Err(e) = inserted {
        let unique = e
            .as_database_error()
            .is_some_and(|d| d.is_unique_violation());
        return Err(if unique {
            ControlError::Conflict(
                "a release is already in flight for this pipeline; complete or roll it back first"
                    .into(),
            )
        } else {
            e.into()
        });
    }
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::ReleaseCreate,
            target_id: &release_id,
            environment_id: Some(&pipeline.environment_id),
            details: json!({
                "pipelineId": pipeline.id,
                "canaryVersion": canary_version,
                "previousVersion": pipeline.deployed_version,
                "planless": planless,
                "plan": plan_json,
                "baselineEps": baseline,
                "stage1Nodes": stage_nodes,
                "freezeOverride": freeze_override,
            }),
        },
    )
    .await?;
    tracing::info!(
        release_id,
        pipeline = pipeline.name,
        canary_version,
        "canary release created"
    );
    get_release(ctl, &release_id).await
}
