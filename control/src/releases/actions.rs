//! Operator actions on a release: advance, complete, broaden, rollback. Advance, complete
//! and broaden re-evaluate the current stage's gates first and refuse, recording the
//! failing gate and changing nothing else, when one fails. A manual action never rolls back
//! on its own.

use crate::audit::Actor;
use vf_rules::{check_action, evaluate_stage, on_manual, Action, Decision};

use super::inputs::gate_inputs;
use super::state::{get_release, GateEvaluation, ReleaseRow};
use super::transition::{apply, Step};
use crate::{Control, ControlError, Result};

/// The word recorded for what a decision led to.
pub(crate) fn decision_name(d: &Decision) -> &'static str {
    match d {
        Decision::StartStage(_) => "advance",
        Decision::Complete => "complete",
        Decision::Hold { .. } => "hold",
        Decision::Rollback { .. } => "rollback",
    }
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::Advance => "advance",
        Action::Complete => "complete",
        Action::Rollback => "rollback",
        Action::Broaden => "broaden",
    }
}

/// Runs an operator action on a release.
pub async fn act(
    ctl: &Control,
    actor: &Actor,
    release_id: &str,
    action: Action,
) -> Result<ReleaseRow> {
    let now = ctl.now();
    let release = get_release(&ctl.db, release_id).await?;
    let plan = release.plan()?;
    let index = usize::try_from(release.current_stage).unwrap_or(0);
    check_action(
        release.status(),
        action,
        index,
        plan.stages().len(),
        release.is_planless(),
    )
    .map_err(|refusal| ControlError::Conflict(refusal.to_string()))?;

    if action == Action::Rollback {
        let reason = format!("rolled back by {}", actor.name);
        return apply(
            ctl,
            &release,
            Step::Decided(Decision::Rollback { reason }),
            None,
            actor,
            now,
        )
        .await;
    }

    let gates = plan.stage(index).map(|s| s.gates.as_slice()).unwrap_or(&[]);
    let inputs = gate_inputs(ctl, &release, &plan, now).await.map_err(|e| {
        e.report(ctl, &release.id, "refusing the operator's action");
        ControlError::Conflict(format!("refused: {}", e.reason(&release.id)))
    })?;
    let results = evaluate_stage(gates, &inputs);
    let evaluation = |decision: &str| GateEvaluation {
        at: now,
        trigger: action_name(action).to_string(),
        actor: actor.name.clone(),
        results: results.clone(),
        decision: decision.to_string(),
    };
    match on_manual(action, &plan, index, &results) {
        Ok(decision) => {
            let eval = evaluation(decision_name(&decision));
            apply(
                ctl,
                &release,
                Step::Decided(decision),
                Some(eval),
                actor,
                now,
            )
            .await
        }
        Err(refusal) => {
            let reason = refusal.to_string();
            apply(
                ctl,
                &release,
                Step::Refused {
                    reason: reason.clone(),
                },
                Some(evaluation("refused")),
                actor,
                now,
            )
            .await?;
            Err(ControlError::Conflict(format!("refused: {reason}")))
        }
    }
}
