//! Persisting a decision about a release. Every transition is one transaction guarded by a
//! compare-and-set on the release's row version: of a scheduler tick and a button press (or
//! two replicas) racing on the same release, exactly one wins; the loser gets a conflict.

use serde_json::json;
use vf_rules::{Decision, ReleaseStatus};

use super::state::{get_release, GateEvaluation, ReleaseRow, StageState};
use super::targets::FleetSnapshot;
use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::pipelines::{get_pipeline, get_version, insert_version};
use crate::{Control, ControlError, Result};

/// What to do to the release row; built from a [`Decision`] or an operator's rollback.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Decided(Decision),
    /// A manual advance or complete refused by a failing gate: record it, change nothing else.
    Refused {
        reason: String,
    },
}

/// Applies `step` to the release as read (`release.row_version` is the expected version).
pub async fn apply(
    ctl: &Control,
    release: &ReleaseRow,
    step: Step,
    evaluation: Option<GateEvaluation>,
    actor: &Actor,
    now: i64,
) -> Result<ReleaseRow> {
    let db = &ctl.db;
    let pipeline = get_pipeline(db, &release.pipeline_id).await?;
    let mut stages = release.stage_states();
    let index = usize::try_from(release.current_stage).unwrap_or(0);
    if let (Some(stage), Some(eval)) = (stages.get_mut(index), evaluation.clone()) {
        stage.evaluations.push(eval);
    }

    let mut status = release.status();
    let mut current_stage = release.current_stage;
    let mut bake_deadline = release.bake_deadline;
    let mut hold_reason = release.hold_reason.clone();
    let mut failure_reason = release.failure_reason.clone();
    let mut completed_at = release.completed_at;
    let (action, reason) = match &step {
        Step::Refused { reason } => (AuditAction::ReleaseRefused, reason.clone()),
        Step::Decided(Decision::StartStage(next)) => {
            let plan = release.plan()?;
            let stage = plan.stage(*next).ok_or_else(|| {
                ControlError::Internal(anyhow::anyhow!("stage {next} is not in the plan"))
            })?;
            let snapshot = FleetSnapshot::read(db, &pipeline).await?;
            let field = format!("rolloutPlan.stages[{next}].selector");
            let targets = snapshot.targets(&release.id, &stage.selector, &field)?;
            let additions = vf_rules::stage_additions(&release.targeted(), &targets);
            let start_minute_events =
                super::inputs::events_in_minute(db, &pipeline.id, now).await?;
            if let Some(s) = stages.get_mut(index) {
                s.outcome = Some("passed".into());
            }
            stages.push(StageState {
                index: *next as i64,
                node_ids: additions,
                started_at: now,
                bake_deadline: stage.bake.deadline_ms(now),
                start_minute_events,
                evaluations: Vec::new(),
                outcome: None,
            });
            status = ReleaseStatus::CanaryDeployed;
            current_stage = *next as i64;
            bake_deadline = Some(stage.bake.deadline_ms(now));
            hold_reason = None;
            (
                AuditAction::ReleaseAdvance,
                format!("stage {} started", next + 1),
            )
        }
        Step::Decided(Decision::Complete) => {
            if let Some(s) = stages.get_mut(index) {
                s.outcome = Some("passed".into());
            }
            status = ReleaseStatus::Broadened;
            hold_reason = None;
            completed_at = Some(now);
            (
                AuditAction::ReleaseComplete,
                "every node converges on the canary version".to_string(),
            )
        }
        Step::Decided(Decision::Hold { reason }) => {
            if let Some(s) = stages.get_mut(index) {
                s.outcome = Some("held".into());
            }
            status = ReleaseStatus::HealthCheck;
            hold_reason = Some(reason.clone());
            (AuditAction::ReleaseHold, reason.clone())
        }
        Step::Decided(Decision::Rollback { reason }) => {
            if let Some(s) = stages.get_mut(index) {
                if evaluation.is_some() {
                    s.outcome = Some("failed".into());
                }
            }
            status = ReleaseStatus::RolledBack;
            hold_reason = None;
            failure_reason = Some(reason.clone());
            completed_at = Some(now);
            (AuditAction::ReleaseRollback, reason.clone())
        }
    };

    // Read before the transaction: on SQLite it holds the only connection.
    let previous_config = match (&step, release.previous_version) {
        (Step::Decided(Decision::Rollback { .. }), Some(previous)) => Some((
            previous,
            get_version(db, &pipeline.id, previous).await?.config_yaml,
        )),
        _ => None,
    };

    let mut tx = db.pool.begin().await?;
    let done = sqlx::query(
        "UPDATE releases SET status = $1, stages = $2, current_stage = $3, bake_deadline = $4,
            hold_reason = $5, failure_reason = $6, updated_by = $7, updated_at = $8,
            completed_at = $9, row_version = row_version + 1
         WHERE id = $10 AND row_version = $11",
    )
    .bind(status.as_str())
    .bind(serde_json::to_string(&stages)?)
    .bind(current_stage)
    .bind(bake_deadline)
    .bind(&hold_reason)
    .bind(&failure_reason)
    .bind(&actor.name)
    .bind(now)
    .bind(completed_at)
    .bind(&release.id)
    .bind(release.row_version)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() != 1 {
        return Err(ControlError::Conflict(
            "the release changed meanwhile (another action or the scheduler got there first); reload and try again".into(),
        ));
    }

    let mut reverted_version = None;
    match &step {
        Step::Decided(Decision::Complete) => {
            set_deployed(&mut tx, &pipeline.id, Some(release.canary_version), now).await?;
        }
        Step::Decided(Decision::Rollback { .. }) => match previous_config {
            Some((previous, config)) => {
                let changelog = format!(
                    "Rollback of v{}: reverted config of v{previous}",
                    release.canary_version
                );
                let v =
                    insert_version(&mut tx, &pipeline.id, &config, &changelog, &actor.name, now)
                        .await?;
                set_deployed(&mut tx, &pipeline.id, Some(v), now).await?;
                reverted_version = Some(v);
            }
            // A first deploy rolled back: the pipeline is undeployed, nodes stop it.
            None => set_deployed(&mut tx, &pipeline.id, None, now).await?,
        },
        _ => {}
    }
    audit::record(
        &mut tx,
        now,
        AuditEntry {
            actor,
            action,
            target_id: &release.id,
            environment_id: Some(&pipeline.environment_id),
            details: json!({
                "pipelineId": pipeline.id,
                "stage": index + 1,
                "from": release.status,
                "to": status.as_str(),
                "reason": reason,
                "gateResults": evaluation.as_ref().map(|e| &e.results),
                "revertedVersion": reverted_version,
            }),
        },
    )
    .await?;
    tx.commit().await?;
    ctl.metrics.transition(action);
    for result in evaluation.iter().flat_map(|e| &e.results) {
        ctl.metrics.gate_result(result);
    }
    tracing::info!(
        release_id = release.id,
        action = action.as_str(),
        reason,
        "release transition"
    );
    get_release(db, &release.id).await
}

async fn set_deployed(
    conn: &mut sqlx::AnyConnection,
    pipeline_id: &str,
    version: Option<i64>,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "UPDATE pipelines SET deployed_version = $1, updated_at = $2, row_version = row_version + 1 WHERE id = $3",
    )
    .bind(version)
    .bind(now)
    .bind(pipeline_id)
    .execute(conn)
    .await?;
    Ok(())
}
