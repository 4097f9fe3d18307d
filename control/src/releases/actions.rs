//! Operator actions on a release: advance, complete, broaden, rollback, pause, resume, each
//! with an optional reason. Advance, complete and broaden re-evaluate the current stage's
//! gates first and refuse when one fails, recording a refused attempt (who, when, which gate,
//! why) and changing nothing else: the stage's evaluations stay the scheduler's and the
//! successful actions'. A manual action never rolls back on its own.

use crate::audit::Actor;
use crate::freeze::hold_of_pipeline;
use vf_rules::freeze::Change;
use vf_rules::{
    check_action, on_manual, stage_results, Action, Decision, GateEvaluation, Note, Refusal,
    RefusedAttempt, Step, MAX_REASON_CHARS,
};

use super::inputs::gate_inputs;
use super::state::{read_release, ReadBy, Release, StoredRelease};
use super::transition::{apply, apply_noted, roll_back_unreadable};
use crate::{Control, ControlError, Result};

/// Runs an operator action on a release; returns the release as it now reads. Rollback also
/// works on an in-flight release whose stored state does not parse (the only way out for
/// its pipeline short of repairing the row); every other action on it is refused.
pub async fn act(
    ctl: &Control,
    actor: &Actor,
    release_id: &str,
    action: Action,
) -> Result<StoredRelease> {
    act_with_reason(ctl, actor, release_id, action, None, false).await
}

/// [`act`] with the reason the operator gave (at most 500 characters; blank is none): kept
/// on the release (`notes`, and a rollback's failure reason) and in the audit event. With
/// `override_freeze` (an admin's, the caller checked the role) an advance or complete goes
/// through a freeze window, and the reason is required.
pub async fn act_with_reason(
    ctl: &Control,
    actor: &Actor,
    release_id: &str,
    action: Action,
    reason: Option<String>,
    override_freeze: bool,
) -> Result<StoredRelease> {
    let reason = operator_reason(reason)?;
    if override_freeze {
        crate::freeze::freeze_override(reason.as_deref())?;
    }
    let release = match read_release(ctl, release_id, ReadBy::Action).await? {
        Ok(release) => release,
        Err(unreadable) if action == Action::Rollback => {
            roll_back_unreadable(ctl, &unreadable, actor, ctl.now()).await?;
            return read_release(ctl, release_id, ReadBy::View).await;
        }
        Err(unreadable) => return Err(unreadable.refusal()),
    };
    act_on(ctl, actor, &release, action, reason, override_freeze)
        .await
        .map(Ok)
}

/// A reason as given: trimmed, blank is none, at most [`MAX_REASON_CHARS`] characters.
pub fn operator_reason(reason: Option<String>) -> Result<Option<String>> {
    let reason = reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty());
    if reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Err(ControlError::invalid(
            "reason",
            format!("at most {MAX_REASON_CHARS} characters"),
        ));
    }
    Ok(reason)
}

async fn act_on(
    ctl: &Control,
    actor: &Actor,
    release: &Release,
    action: Action,
    reason: Option<String>,
    override_freeze: bool,
) -> Result<Release> {
    let now = ctl.now();
    let state = &release.state;
    let index = state.current_stage;
    check_action(
        state.status,
        action,
        index,
        state.plan.stages().len(),
        state.planless,
        state.paused.is_some(),
    )
    .map_err(|refusal| ControlError::Conflict(refusal.to_string()))?;
    let change = match action {
        Action::Advance => Some(Change::Advance),
        Action::Complete | Action::Broaden => Some(Change::Complete),
        Action::Resume => Some(Change::Resume),
        Action::Rollback | Action::Pause => None,
    };
    if let Some(change) = change {
        (hold_of_pipeline(&ctl.db, &release.pipeline_id, now).await?)
            .allow(change, override_freeze)?;
    }
    let note = reason.clone().map(|reason| Note {
        at: now,
        actor: actor.name.clone(),
        action: action.into(),
        reason,
    });

    let by = actor.name.clone();
    let step = match action {
        Action::Rollback => {
            let said = match &reason {
                Some(reason) => format!("rolled back by {by}: {reason}"),
                None => format!("rolled back by {by}"),
            };
            Some(Step::Decided(Decision::Rollback { reason: said }))
        }
        Action::Pause => Some(Step::Pause {
            by,
            reason: reason.clone(),
            line_stop: false,
        }),
        Action::Resume => Some(Step::Resume { by }),
        Action::Advance | Action::Complete | Action::Broaden => None,
    };
    if let Some(step) = step {
        return apply_noted(ctl, release, step, None, note, actor, now).await;
    }

    let gates = state
        .plan
        .stage(index)
        .map(|s| s.gates.as_slice())
        .unwrap_or(&[]);
    let inputs = gate_inputs(ctl, release, gates, now).await.map_err(|e| {
        e.report(ctl, &release.id, "refusing the operator's action");
        ControlError::Conflict(format!("refused: {}", e.reason(&release.id)))
    })?;
    let results = stage_results(gates, state.plan.min_applied_percent(index), &inputs);
    match on_manual(action, &state.plan, index, &results) {
        Ok(decision) => {
            let evaluation = GateEvaluation {
                at: now,
                trigger: action.into(),
                actor: actor.name.clone(),
                results,
                decision: decision.kind(),
            };
            apply_noted(
                ctl,
                release,
                Step::Decided(decision),
                Some(evaluation),
                note,
                actor,
                now,
            )
            .await
        }
        // Kept as a refused attempt, never as the stage's evaluation: an early press of
        // "Advance" says nothing about the canary.
        Err(refusal) => {
            let gate = match &refusal {
                Refusal::GateFailed { gate, .. } => Some(gate.clone()),
                _ => None,
            };
            let reason = refusal.to_string();
            let attempt = RefusedAttempt {
                at: now,
                actor: actor.name.clone(),
                action: action.into(),
                gate,
                reason: reason.clone(),
            };
            apply(ctl, release, Step::Refused(attempt), None, actor, now).await?;
            Err(ControlError::Conflict(format!("refused: {reason}")))
        }
    }
}
