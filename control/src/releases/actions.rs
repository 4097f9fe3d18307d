//! Operator actions on a release: advance, complete, broaden, rollback. Advance, complete
//! and broaden re-evaluate the current stage's gates first and refuse, recording the
//! failing gate and changing nothing else, when one fails. A manual action never rolls back
//! on its own.

use crate::audit::Actor;
use vf_rules::{check_action, evaluate_stage, on_manual, Action, Decision, GateEvaluation, Step};

use super::inputs::gate_inputs;
use super::state::{get_release, Release};
use super::transition::apply;
use crate::{Control, ControlError, Result};

/// Runs an operator action on a release.
pub async fn act(
    ctl: &Control,
    actor: &Actor,
    release_id: &str,
    action: Action,
) -> Result<Release> {
    let now = ctl.now();
    let release = get_release(ctl, release_id).await?;
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
        return apply(ctl, &release, step, None, actor, now).await;
    }

    let gates = state
        .plan
        .stage(index)
        .map(|s| s.gates.as_slice())
        .unwrap_or(&[]);
    let inputs = gate_inputs(ctl, &release, now).await.map_err(|e| {
        e.report(ctl, &release.id, "refusing the operator's action");
        ControlError::Conflict(format!("refused: {}", e.reason(&release.id)))
    })?;
    let results = evaluate_stage(gates, &inputs);
    let step = match on_manual(action, &state.plan, index, &results) {
        Ok(decision) => Step::Decided(decision),
        Err(refusal) => Step::Refused {
            reason: refusal.to_string(),
        },
    };
    let evaluation = GateEvaluation {
        at: now,
        trigger: action.into(),
        actor: actor.name.clone(),
        results,
        decision: step.kind(),
    };
    let refused = match &step {
        Step::Refused { reason } => Some(reason.clone()),
        Step::Decided(_) => None,
    };
    let applied = apply(ctl, &release, step, Some(evaluation), actor, now).await?;
    match refused {
        Some(reason) => Err(ControlError::Conflict(format!("refused: {reason}"))),
        None => Ok(applied),
    }
}
