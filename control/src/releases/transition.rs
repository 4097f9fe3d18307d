//! Persisting a step of a release. The next state comes whole from the pure
//! [`vf_rules::ReleaseState::apply`]; this file reads what it needs (the nodes a stage adds,
//! the previous config), writes the state in one transaction guarded by a compare-and-set on
//! the row version, applies the deploy it asks for, and audits. Of a scheduler tick and a
//! button press (or two replicas) racing on the same release, exactly one wins; the loser
//! gets a conflict.

use serde_json::json;
use vf_rules::freeze::Change;
use vf_rules::{
    Decision, Deploy, GateEvaluation, Note, OpenedStage, ReleaseState, ReleaseStatus, Step,
};

use super::state::{get_release, Release, Unreadable};
use super::targets::FleetSnapshot;
use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::pipelines::{get_pipeline, get_version, insert_version, PipelineRow};
use crate::{Control, ControlError, Result};

/// What a stage adds when it opens now; create and advance both open stages with this.
pub(super) async fn opening(
    ctl: &Control,
    pipeline: &PipelineRow,
    node_ids: Vec<String>,
    now: i64,
) -> Result<OpenedStage> {
    Ok(OpenedStage {
        node_ids,
        start_minute_events: super::inputs::events_in_minute(&ctl.db, &pipeline.id, now).await?,
    })
}

/// Applies `step` to the release as read (`release.row_version` is the expected version).
pub async fn apply(
    ctl: &Control,
    release: &Release,
    step: Step,
    evaluation: Option<GateEvaluation>,
    actor: &Actor,
    now: i64,
) -> Result<Release> {
    apply_noted(ctl, release, step, evaluation, None, actor, now).await
}

/// [`apply`] with the reason an operator gave, kept on the release and in the audit event.
pub async fn apply_noted(
    ctl: &Control,
    release: &Release,
    step: Step,
    evaluation: Option<GateEvaluation>,
    note: Option<Note>,
    actor: &Actor,
    now: i64,
) -> Result<Release> {
    let db = &ctl.db;
    let pipeline = get_pipeline(db, &release.pipeline_id).await?;
    let opened = match step.opens() {
        Some(index) => {
            let snapshot = FleetSnapshot::read(db, &pipeline).await?;
            let state = &release.state;
            let added = snapshot.additions(
                &release.id,
                &state.plan,
                state.planless,
                index,
                &state.targeted(),
            )?;
            Some(opening(ctl, &pipeline, added, now).await?)
        }
        None => None,
    };
    let results = evaluation.as_ref().map(|e| e.results.clone());
    let operator_reason = note.as_ref().map(|n| n.reason.clone());
    let t = release
        .state
        .apply_noted(&step, evaluation, opened, note, now)
        .map_err(|e| ControlError::Internal(anyhow::anyhow!("release {}: {e}", release.id)))?;
    let action = AuditAction::release(t.kind);

    // Read before the transaction: on SQLite it holds the only connection.
    let previous_config =
        previous_config(ctl, &pipeline, t.deploy, release.previous_version).await?;

    let next = &t.state;
    let mut tx = audit::begin(db).await?;
    // A stopped line holds every step forward, read where the step commits.
    if let Some(change) = forward(&step) {
        crate::freeze::refuse_in(&mut tx, &pipeline.environment_id, change, true, now).await?;
    }
    let done = sqlx::query(
        "UPDATE releases SET status = $1, stages = $2, current_stage = $3, bake_deadline = $4,
            hold_reason = $5, failure_reason = $6, updated_by = $7, updated_at = $8,
            completed_at = $9, next_check_at = $10, paused = $11, notes = $12,
            row_version = row_version + 1
         WHERE id = $13 AND row_version = $14",
    )
    .bind(next.status.as_str())
    .bind(serde_json::to_string(&next.stages)?)
    .bind(next.current_stage as i64)
    .bind(next.bake_deadline)
    .bind(&next.hold_reason)
    .bind(&next.failure_reason)
    .bind(&actor.name)
    .bind(now)
    .bind(next.completed_at)
    .bind(next.next_check_at())
    .bind(
        next.paused
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?,
    )
    .bind(
        (!next.notes.is_empty())
            .then(|| serde_json::to_string(&next.notes))
            .transpose()?,
    )
    .bind(&release.id)
    .bind(release.row_version)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() != 1 {
        return Err(changed_meanwhile());
    }
    let reverted_version = deploy(
        &mut tx,
        &pipeline,
        release.canary_version,
        t.deploy,
        previous_config,
        actor,
        now,
    )
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action,
            target_id: &release.id,
            environment_id: Some(&pipeline.environment_id),
            details: json!({
                "pipelineId": pipeline.id,
                "stage": release.state.current_stage + 1,
                "from": release.state.status,
                "to": next.status,
                "reason": t.reason,
                "operatorReason": operator_reason,
                "gateResults": results,
                "revertedVersion": reverted_version,
            }),
        },
    )
    .await?;
    ctl.metrics.transition(action);
    for result in results.iter().flatten() {
        ctl.metrics.gate_result(result);
    }
    tracing::info!(
        release_id = release.id,
        action = action.as_str(),
        reason = t.reason,
        "release transition"
    );
    get_release(ctl, &release.id).await
}

/// The change a step makes that a stopped line holds back: advance, complete, resume.
fn forward(step: &Step) -> Option<Change> {
    match step {
        Step::Decided(Decision::StartStage(_)) => Some(Change::Advance),
        Step::Decided(Decision::Complete) => Some(Change::Complete),
        Step::Resume { .. } => Some(Change::Resume),
        Step::Decided(Decision::Hold { .. } | Decision::Rollback { .. })
        | Step::Refused(_)
        | Step::Pause { .. } => None,
    }
}

/// Stores the checks of a baking release (`checked`, from
/// [`vf_rules::ReleaseState::record_checks`]) and when its next check is due, by
/// compare-and-set like every transition. Checks are not audited: the evaluation that acts on
/// them is.
pub async fn record_checks(ctl: &Control, release: &Release, checked: &ReleaseState) -> Result<()> {
    let done = sqlx::query(
        "UPDATE releases SET stages = $1, next_check_at = $2, row_version = row_version + 1
         WHERE id = $3 AND row_version = $4",
    )
    .bind(serde_json::to_string(&checked.stages)?)
    .bind(checked.next_check_at())
    .bind(&release.id)
    .bind(release.row_version)
    .execute(&ctl.db.pool)
    .await?;
    if done.rows_affected() != 1 {
        return Err(changed_meanwhile());
    }
    Ok(())
}

/// Rolls back an in-flight release whose stored state does not parse, so an operator can
/// unblock its pipeline without repairing the row: the previous version's config is deployed
/// again (or a first deploy undeployed) exactly as a normal rollback does. Only the status
/// and reasons are written; the unreadable columns are left as they were for inspection,
/// and the audit event records what could not be read.
pub async fn roll_back_unreadable(
    ctl: &Control,
    unreadable: &Unreadable,
    actor: &Actor,
    now: i64,
) -> Result<()> {
    let row = &unreadable.row;
    let in_flight = ReleaseStatus::parse(&row.status).is_some_and(|s| s.in_flight());
    if !in_flight {
        return Err(unreadable.refusal());
    }
    let db = &ctl.db;
    let pipeline = get_pipeline(db, &row.pipeline_id).await?;
    let previous_config =
        previous_config(ctl, &pipeline, Deploy::Previous, row.previous_version).await?;
    let reason = format!(
        "rolled back by {} while its state was unreadable ({}: {})",
        actor.name, unreadable.field, unreadable.message
    );
    let mut tx = audit::begin(db).await?;
    let done = sqlx::query(
        "UPDATE releases SET status = $1, bake_deadline = NULL, next_check_at = NULL,
            hold_reason = NULL, failure_reason = $2, updated_by = $3, updated_at = $4, completed_at = $4,
            row_version = row_version + 1
         WHERE id = $5 AND row_version = $6",
    )
    .bind(ReleaseStatus::RolledBack.as_str())
    .bind(&reason)
    .bind(&actor.name)
    .bind(now)
    .bind(&row.id)
    .bind(row.row_version)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() != 1 {
        return Err(changed_meanwhile());
    }
    let reverted_version = deploy(
        &mut tx,
        &pipeline,
        row.canary_version,
        Deploy::Previous,
        previous_config,
        actor,
        now,
    )
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::ReleaseRollback,
            target_id: &row.id,
            environment_id: Some(&pipeline.environment_id),
            details: json!({
                "pipelineId": pipeline.id,
                "from": row.status,
                "to": ReleaseStatus::RolledBack,
                "reason": reason,
                "unreadable": {"field": unreadable.field, "message": unreadable.message},
                "revertedVersion": reverted_version,
            }),
        },
    )
    .await?;
    ctl.metrics.transition(AuditAction::ReleaseRollback);
    tracing::warn!(
        release_id = row.id,
        field = unreadable.field,
        reason,
        "unreadable release rolled back"
    );
    Ok(())
}

fn changed_meanwhile() -> ControlError {
    ControlError::Conflict(
        "the release changed meanwhile (another action or the scheduler got there first); reload and try again".into(),
    )
}

/// The previous version and its config when `deploy` reverts to it.
async fn previous_config(
    ctl: &Control,
    pipeline: &PipelineRow,
    deploy: Deploy,
    previous_version: Option<i64>,
) -> Result<Option<(i64, String)>> {
    Ok(match (deploy, previous_version) {
        (Deploy::Previous, Some(previous)) => Some((
            previous,
            get_version(&ctl.db, &pipeline.id, previous)
                .await?
                .config_yaml,
        )),
        _ => None,
    })
}

/// Moves the pipeline's deployed version as the transition asks; returns the reverted
/// version a rollback published.
async fn deploy(
    tx: &mut sqlx::AnyConnection,
    pipeline: &PipelineRow,
    canary_version: i64,
    deploy: Deploy,
    previous_config: Option<(i64, String)>,
    actor: &Actor,
    now: i64,
) -> Result<Option<i64>> {
    match (deploy, previous_config) {
        (Deploy::Nothing, _) => Ok(None),
        (Deploy::Canary, _) => {
            set_deployed(tx, &pipeline.id, Some(canary_version), now).await?;
            Ok(None)
        }
        (Deploy::Previous, Some((previous, config))) => {
            let changelog =
                format!("Rollback of v{canary_version}: reverted config of v{previous}");
            let v = insert_version(tx, &pipeline.id, &config, &changelog, &actor.name, now).await?;
            set_deployed(tx, &pipeline.id, Some(v), now).await?;
            Ok(Some(v))
        }
        // A first deploy rolled back: the pipeline is undeployed, nodes stop it.
        (Deploy::Previous, None) => {
            set_deployed(tx, &pipeline.id, None, now).await?;
            Ok(None)
        }
    }
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
