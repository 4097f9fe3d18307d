//! Operator actions on a release: advance, complete, broaden, rollback. Advance, complete
//! and broaden re-evaluate the current stage's gates first and refuse when one fails,
//! recording a refused attempt (who, when, which gate, why) and changing nothing else: the
//! stage's evaluations stay the scheduler's and the successful actions'. A manual action never rolls back
//! on its own.

use crate::audit::Actor;
use vf_rules::{
    check_action, on_manual, stage_results, Action, Decision, GateEvaluation, Refusal,
    RefusedAttempt, Step,
};

use super::inputs::gate_inputs;
use super::state::{read_release, ReadBy, Release, StoredRelease};
use super::transition::{apply, roll_back_unreadable};
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
    let release = match read_release(ctl, release_id, ReadBy::Action).await? {
        Ok(release) => release,
        Err(unreadable) if action == Action::Rollback => {
            roll_back_unreadable(ctl, &unreadable, actor, ctl.now()).await?;
            return read_release(ctl, release_id, ReadBy::View).await;
        }
        Err(unreadable) => return Err(unreadable.refusal()),
    };
    act_on(ctl, actor, &release, action).await.map(Ok)
}

async fn act_on(
    ctl: &Control,
    actor: &Actor,
    release: &Release,
    action: Action,
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
    )
    .map_err(|refusal| ControlError::Conflict(refusal.to_string()))?;

    if action == Action::Rollback {
        let reason = format!("rolled back by {}", actor.name);
        let step = Step::Decided(Decision::Rollback { reason });
        return apply(ctl, release, step, None, actor, now).await;
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
            apply(
                ctl,
                release,
                Step::Decided(decision),
                Some(evaluation),
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
