//! The release state machine: which operator actions a release allows, and what happens
//! when a stage's bake ends or an operator presses a button.
//!
//! These functions only decide. The caller persists the decision with a compare-and-set on
//! the release row, so a scheduler tick and a button press can never both win.
//!
//! Plan-less canaries run the one-stage plan from [`crate::plan::RolloutPlan::planless`]
//! (hold after the health window, never auto-advance or auto-roll back). The caller passes
//! `planless` because only the actions differ: such a release cannot advance, and finishes
//! with *Broaden*; *Complete* is accepted too and means the same thing, so an API client
//! that always says "complete" works for both shapes.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::gates::{all_passed, GateResult, Verdict};
use crate::plan::RolloutPlan;

mod state;

pub use state::{
    open_stage, DecisionKind, Deploy, GateEvaluation, Note, OpenedStage, Pause, RefusedAttempt,
    ReleaseState, StageOutcome, StageState, Step, Transition, TransitionError, Trigger,
    MAX_REASON_CHARS,
};

/// Where a release stands. The first two are "in flight": fencing applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReleaseStatus {
    /// A stage is baking.
    CanaryDeployed,
    /// The bake is over and the release waits for an operator.
    HealthCheck,
    /// Complete: every node converges on the canary version.
    Broadened,
    RolledBack,
}

impl ReleaseStatus {
    const ALL: [ReleaseStatus; 4] = [
        ReleaseStatus::CanaryDeployed,
        ReleaseStatus::HealthCheck,
        ReleaseStatus::Broadened,
        ReleaseStatus::RolledBack,
    ];

    /// The stored and wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ReleaseStatus::CanaryDeployed => "CANARY_DEPLOYED",
            ReleaseStatus::HealthCheck => "HEALTH_CHECK",
            ReleaseStatus::Broadened => "BROADENED",
            ReleaseStatus::RolledBack => "ROLLED_BACK",
        }
    }

    /// Reads the stored spelling exactly; `None` for anything else.
    pub fn parse(text: &str) -> Option<ReleaseStatus> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// The statuses in which delivery is fenced and the scheduler watches the release;
    /// queries bind these rather than spelling them out.
    pub const IN_FLIGHT: [ReleaseStatus; 2] =
        [ReleaseStatus::CanaryDeployed, ReleaseStatus::HealthCheck];

    /// Whether delivery is fenced and the scheduler watches this release.
    pub fn in_flight(self) -> bool {
        Self::IN_FLIGHT.contains(&self)
    }

    /// A stage is baking: its deadline counts down.
    pub fn baking(self) -> bool {
        self == ReleaseStatus::CanaryDeployed
    }

    /// The words people read: `Baking`, `Held for review`, `Complete`, `Rolled back` (a
    /// paused release says `Paused` instead; the caller knows).
    pub fn label(self) -> &'static str {
        match self {
            ReleaseStatus::CanaryDeployed => "Baking",
            ReleaseStatus::HealthCheck => "Held for review",
            ReleaseStatus::Broadened => "Complete",
            ReleaseStatus::RolledBack => "Rolled back",
        }
    }
}

impl fmt::Display for ReleaseStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an operator can ask of a release. On the wire: `advance`, `complete`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Advance,
    Complete,
    Rollback,
    Broaden,
    /// Stop the bake clock and the scheduler until resumed.
    Pause,
    Resume,
}

impl Action {
    /// The button text in the rollout view.
    pub fn label(self) -> &'static str {
        match self {
            Action::Advance => "Advance next stage",
            Action::Complete => "Complete all remaining",
            Action::Rollback => "Roll back",
            Action::Broaden => "Broaden",
            Action::Pause => "Pause",
            Action::Resume => "Resume",
        }
    }
}

/// Why an action was refused; the message is shown to the operator as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("release is already complete")]
    AlreadyComplete,
    #[error("release is already rolled back")]
    AlreadyRolledBack,
    #[error("a plan-less canary has no next stage; broaden it instead")]
    NoPlan,
    #[error("stage {stage} is the last stage; complete the release instead")]
    LastStage { stage: usize },
    #[error("broaden is for plan-less canaries; use complete all remaining")]
    HasPlan,
    /// A manual advance or complete re-read the gates and one failed. Nothing changes: a
    /// manual action never rolls back.
    #[error("{gate} gate failed: {reason}")]
    GateFailed { gate: String, reason: String },
    #[error("the release is paused; resume it first")]
    Paused,
    #[error("the release is already paused")]
    AlreadyPaused,
    #[error("the release is not paused")]
    NotPaused,
}

/// What to do with a release after its gates were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Open the stage with this index (0-based) and start its bake.
    StartStage(usize),
    /// Broaden: the canary becomes the deployed version.
    Complete,
    /// Stay in `HEALTH_CHECK` until an operator acts.
    Hold {
        reason: String,
    },
    Rollback {
        reason: String,
    },
}

/// Whether `action` is allowed now. `stage_index` is the current stage (0-based) of
/// `stage_count`. Gates are not consulted here; see [`on_manual`]. A paused release allows
/// only resume and rollback: rollback is always allowed while in flight.
pub fn check_action(
    status: ReleaseStatus,
    action: Action,
    stage_index: usize,
    stage_count: usize,
    planless: bool,
    paused: bool,
) -> Result<(), Refusal> {
    match status {
        ReleaseStatus::Broadened => return Err(Refusal::AlreadyComplete),
        ReleaseStatus::RolledBack => return Err(Refusal::AlreadyRolledBack),
        ReleaseStatus::CanaryDeployed | ReleaseStatus::HealthCheck => {}
    }
    match action {
        Action::Rollback => return Ok(()),
        Action::Pause if paused => return Err(Refusal::AlreadyPaused),
        Action::Pause => return Ok(()),
        Action::Resume if paused => return Ok(()),
        Action::Resume => return Err(Refusal::NotPaused),
        _ if paused => return Err(Refusal::Paused),
        _ => {}
    }
    match action {
        Action::Advance if planless => Err(Refusal::NoPlan),
        Action::Advance if stage_index + 1 >= stage_count => Err(Refusal::LastStage {
            stage: stage_index + 1,
        }),
        Action::Broaden if !planless => Err(Refusal::HasPlan),
        _ => Ok(()),
    }
}

/// The buttons to show. A plan-less release shows *Broaden* rather than *Complete all
/// remaining* (both are accepted), so the view never offers two buttons that do one thing.
pub fn allowed_actions(
    status: ReleaseStatus,
    stage_index: usize,
    stage_count: usize,
    planless: bool,
    paused: bool,
) -> Vec<Action> {
    let finish = if planless {
        Action::Broaden
    } else {
        Action::Complete
    };
    let shown = [
        Action::Advance,
        finish,
        Action::Pause,
        Action::Resume,
        Action::Rollback,
    ];
    shown
        .into_iter()
        .filter(|a| check_action(status, *a, stage_index, stage_count, planless, paused).is_ok())
        .collect()
}

/// The scheduler's step once the current stage's bake deadline passed and its gates were
/// evaluated (`results`, settled by [`crate::gates::settle`]). A failing gate rolls back
/// (or holds, without `autoRollbackOnGateFail`); a gate left without a number under
/// `onNoData: "hold"` holds. Stage numbers in reasons are 1-based, as the rollout view
/// shows them.
pub fn on_bake_expired(
    plan: &RolloutPlan,
    current_stage_index: usize,
    results: &[GateResult],
) -> Decision {
    let stage = current_stage_index + 1;
    let failed: Vec<GateResult> = (results.iter())
        .filter(|r| r.verdict == Verdict::Fail)
        .cloned()
        .collect();
    if !failed.is_empty() {
        let reason = format!("stage {stage} failed: {}", failing_reasons(&failed));
        return gate_failed(plan, reason);
    }
    if !all_passed(results) {
        return Decision::Hold {
            reason: format!(
                "stage {stage} could not be judged: {}",
                failing_reasons(results)
            ),
        };
    }
    if !plan.auto_advance() {
        Decision::Hold {
            reason: format!("stage {stage} passed; waiting for an operator"),
        }
    } else {
        next_or_complete(plan, current_stage_index)
    }
}

/// The scheduler's step when checks during the bake failed gates (`failed`, from
/// [`crate::checks::record`]): roll back at once, or hold without `autoRollbackOnGateFail`.
pub fn on_check_failed(
    plan: &RolloutPlan,
    current_stage_index: usize,
    failed: &[GateResult],
) -> Decision {
    let stage = current_stage_index + 1;
    gate_failed(
        plan,
        format!(
            "stage {stage} failed during its bake: {}",
            failing_reasons(failed)
        ),
    )
}

fn gate_failed(plan: &RolloutPlan, reason: String) -> Decision {
    if plan.auto_rollback_on_gate_fail() {
        Decision::Rollback { reason }
    } else {
        Decision::Hold { reason }
    }
}

/// An operator's action, after [`check_action`] allowed it. `results` are the current
/// stage's gates re-evaluated now: advance, complete and broaden refuse on the first failing
/// gate and change nothing; they never roll back.
pub fn on_manual(
    action: Action,
    plan: &RolloutPlan,
    stage_index: usize,
    results: &[GateResult],
) -> Result<Decision, Refusal> {
    if action == Action::Rollback {
        return Ok(Decision::Rollback {
            reason: "rolled back by an operator".to_owned(),
        });
    }
    if let Some(failed) = results.iter().find(|r| !r.passed()) {
        return Err(Refusal::GateFailed {
            gate: failed.gate.clone(),
            reason: failed.reason.clone(),
        });
    }
    match action {
        Action::Advance if stage_index + 1 >= plan.stages().len() => Err(Refusal::LastStage {
            stage: stage_index + 1,
        }),
        Action::Advance => Ok(Decision::StartStage(stage_index + 1)),
        Action::Complete | Action::Broaden | Action::Rollback | Action::Pause | Action::Resume => {
            Ok(Decision::Complete)
        }
    }
}

fn next_or_complete(plan: &RolloutPlan, stage_index: usize) -> Decision {
    if stage_index + 1 < plan.stages().len() {
        Decision::StartStage(stage_index + 1)
    } else {
        Decision::Complete
    }
}

fn failing_reasons(results: &[GateResult]) -> String {
    let failing: Vec<String> = results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| format!("{}: {}", r.gate, r.reason))
        .collect();
    failing.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::{error_rate, GateInputs, NodeErrors};
    use crate::plan::{CanarySelector, Gate};
    use crate::Percent;
    use crate::Scope;
    use serde_json::json;

    fn plan(stages: usize, auto_advance: bool, auto_rollback: bool) -> RolloutPlan {
        let stage = json!({"selector": {"percentage": 10}, "bakeSeconds": 60, "gates": []});
        RolloutPlan::parse(&json!({
            "stages": vec![stage; stages],
            "autoAdvance": auto_advance,
            "autoRollbackOnGateFail": auto_rollback,
        }))
        .expect("valid plan")
    }

    fn passing() -> Vec<GateResult> {
        vec![crate::gates::evaluate(
            &Gate::HealthWindow,
            &GateInputs::default(),
        )]
    }

    fn failing() -> Vec<GateResult> {
        let nodes = [NodeErrors {
            node: "edge-1".into(),
            this_stage: true,
            errors: 25,
            events_in: 1000,
        }];
        let mut results = passing();
        let mut failed = error_rate(1.0, Scope::Cumulative, Some(&nodes));
        failed.reason = "error rate 2.50% exceeds max 1.00% (25 errors / 1000 events)".into();
        results.push(failed);
        results
    }

    const FAIL_REASON: &str =
        "stage 1 failed: errorRate: error rate 2.50% exceeds max 1.00% (25 errors / 1000 events)";

    #[test]
    fn statuses_round_trip_through_their_stored_spelling() {
        for status in ReleaseStatus::ALL {
            assert_eq!(ReleaseStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(ReleaseStatus::parse("canary_deployed"), None);
        assert_eq!(ReleaseStatus::parse("DEPLOYED"), None);
    }

    #[test]
    fn only_canary_deployed_and_health_check_are_in_flight() {
        assert!(ReleaseStatus::CanaryDeployed.in_flight());
        assert!(ReleaseStatus::HealthCheck.in_flight());
        assert!(!ReleaseStatus::Broadened.in_flight());
        assert!(!ReleaseStatus::RolledBack.in_flight());
    }

    #[test]
    fn a_passing_stage_with_more_to_go_starts_the_next_stage() {
        assert_eq!(
            on_bake_expired(&plan(3, true, true), 0, &passing()),
            Decision::StartStage(1)
        );
    }

    #[test]
    fn a_passing_last_stage_completes_the_release() {
        assert_eq!(
            on_bake_expired(&plan(3, true, true), 2, &passing()),
            Decision::Complete
        );
    }

    #[test]
    fn a_stage_without_gates_passes_when_its_bake_ends() {
        assert_eq!(
            on_bake_expired(&plan(2, true, true), 0, &[]),
            Decision::StartStage(1)
        );
    }

    #[test]
    fn without_auto_advance_a_passing_stage_waits_for_an_operator() {
        assert_eq!(
            on_bake_expired(&plan(3, false, true), 1, &passing()),
            Decision::Hold {
                reason: "stage 2 passed; waiting for an operator".into()
            }
        );
    }

    #[test]
    fn a_failing_gate_rolls_back_with_its_reason() {
        assert_eq!(
            on_bake_expired(&plan(3, true, true), 0, &failing()),
            Decision::Rollback {
                reason: FAIL_REASON.into()
            }
        );
    }

    #[test]
    fn without_auto_rollback_a_failing_gate_holds_with_its_reason() {
        assert_eq!(
            on_bake_expired(&plan(3, true, false), 0, &failing()),
            Decision::Hold {
                reason: FAIL_REASON.into()
            }
        );
    }

    #[test]
    fn a_gate_left_without_data_under_on_no_data_hold_holds_at_the_deadline() {
        let mut held = passing();
        held.push(GateResult {
            gate: "errorRate".into(),
            verdict: Verdict::Inconclusive,
            observed: None,
            threshold: Some(1.0),
            query: None,
            reason: "no events processed by canary nodes since the stage started: onNoData is hold"
                .into(),
        });
        assert_eq!(
            on_bake_expired(&plan(3, true, true), 0, &held),
            Decision::Hold {
                reason: "stage 1 could not be judged: errorRate: no events processed by canary \
                         nodes since the stage started: onNoData is hold"
                    .into()
            }
        );
        // A failing gate wins over one without data.
        held.extend(failing());
        assert!(matches!(
            on_bake_expired(&plan(3, true, true), 0, &held),
            Decision::Rollback { .. }
        ));
    }

    #[test]
    fn a_gate_failed_during_the_bake_rolls_back_at_once_or_holds_without_auto_rollback() {
        let failed = &failing()[1..];
        let reason = "stage 2 failed during its bake: errorRate: error rate 2.50% exceeds max \
                      1.00% (25 errors / 1000 events)";
        assert_eq!(
            on_check_failed(&plan(3, true, true), 1, failed),
            Decision::Rollback {
                reason: reason.into()
            }
        );
        assert_eq!(
            on_check_failed(&plan(3, true, false), 1, failed),
            Decision::Hold {
                reason: reason.into()
            }
        );
    }

    #[test]
    fn a_planless_canary_holds_after_its_health_window() {
        let planless =
            RolloutPlan::planless(CanarySelector::Percentage(Percent::HUNDRED), 5).expect("valid");
        let results =
            crate::gates::stage_results(&planless.stages()[0].gates, 100.0, &GateInputs::default());
        assert!(matches!(
            on_bake_expired(&planless, 0, &results),
            Decision::Hold { .. }
        ));
    }

    #[test]
    fn manual_advance_refuses_when_a_gate_fails_and_never_rolls_back() {
        let refusal =
            on_manual(Action::Advance, &plan(3, true, true), 0, &failing()).expect_err("refused");
        assert_eq!(
            refusal.to_string(),
            "errorRate gate failed: error rate 2.50% exceeds max 1.00% (25 errors / 1000 events)"
        );
        assert!(on_manual(Action::Complete, &plan(3, true, true), 0, &failing()).is_err());
    }

    #[test]
    fn manual_advance_with_passing_gates_opens_the_next_stage() {
        assert_eq!(
            on_manual(Action::Advance, &plan(3, false, true), 1, &passing()),
            Ok(Decision::StartStage(2))
        );
    }

    #[test]
    fn manual_advance_on_the_last_stage_is_refused() {
        assert_eq!(
            on_manual(Action::Advance, &plan(2, false, true), 1, &passing()),
            Err(Refusal::LastStage { stage: 2 })
        );
    }

    #[test]
    fn manual_complete_and_broaden_with_passing_gates_complete_the_release() {
        assert_eq!(
            on_manual(Action::Complete, &plan(3, false, true), 0, &passing()),
            Ok(Decision::Complete)
        );
        assert_eq!(
            on_manual(Action::Broaden, &plan(1, false, false), 0, &passing()),
            Ok(Decision::Complete)
        );
    }

    #[test]
    fn manual_rollback_ignores_the_gates() {
        assert_eq!(
            on_manual(Action::Rollback, &plan(3, true, true), 0, &failing()),
            Ok(Decision::Rollback {
                reason: "rolled back by an operator".into()
            })
        );
    }

    #[test]
    fn nothing_is_allowed_once_the_release_left_flight() {
        for action in [
            Action::Advance,
            Action::Complete,
            Action::Rollback,
            Action::Broaden,
            Action::Pause,
            Action::Resume,
        ] {
            assert_eq!(
                check_action(ReleaseStatus::RolledBack, action, 0, 3, false, false),
                Err(Refusal::AlreadyRolledBack)
            );
            assert_eq!(
                check_action(ReleaseStatus::Broadened, action, 0, 3, true, false),
                Err(Refusal::AlreadyComplete)
            );
        }
        assert_eq!(
            Refusal::AlreadyRolledBack.to_string(),
            "release is already rolled back"
        );
        assert!(allowed_actions(ReleaseStatus::Broadened, 0, 3, false, false).is_empty());
    }

    #[test]
    fn advance_needs_a_plan_and_a_next_stage() {
        let s = ReleaseStatus::HealthCheck;
        assert_eq!(check_action(s, Action::Advance, 0, 3, false, false), Ok(()));
        assert_eq!(
            check_action(s, Action::Advance, 2, 3, false, false),
            Err(Refusal::LastStage { stage: 3 })
        );
        assert_eq!(
            check_action(s, Action::Advance, 0, 1, true, false),
            Err(Refusal::NoPlan)
        );
    }

    #[test]
    fn broaden_is_only_for_planless_canaries_but_complete_works_for_both() {
        let s = ReleaseStatus::CanaryDeployed;
        assert_eq!(
            check_action(s, Action::Broaden, 0, 3, false, false),
            Err(Refusal::HasPlan)
        );
        assert_eq!(check_action(s, Action::Broaden, 0, 1, true, false), Ok(()));
        assert_eq!(check_action(s, Action::Complete, 0, 1, true, false), Ok(()));
        assert_eq!(
            check_action(s, Action::Complete, 0, 3, false, false),
            Ok(())
        );
    }

    #[test]
    fn a_paused_release_only_resumes_or_rolls_back() {
        let s = ReleaseStatus::CanaryDeployed;
        for action in [Action::Advance, Action::Complete, Action::Broaden] {
            assert_eq!(
                check_action(s, action, 0, 3, true, true),
                Err(Refusal::Paused)
            );
        }
        assert_eq!(check_action(s, Action::Resume, 0, 3, false, true), Ok(()));
        assert_eq!(check_action(s, Action::Rollback, 0, 3, false, true), Ok(()));
        assert_eq!(
            check_action(s, Action::Pause, 0, 3, false, true),
            Err(Refusal::AlreadyPaused)
        );
        assert_eq!(
            check_action(s, Action::Resume, 0, 3, false, false),
            Err(Refusal::NotPaused)
        );
        assert_eq!(
            check_action(
                ReleaseStatus::HealthCheck,
                Action::Pause,
                0,
                3,
                false,
                false
            ),
            Ok(())
        );
        assert_eq!(
            check_action(ReleaseStatus::Broadened, Action::Resume, 0, 3, false, true),
            Err(Refusal::AlreadyComplete)
        );
    }

    #[test]
    fn rollback_is_allowed_in_either_in_flight_status() {
        for status in [ReleaseStatus::CanaryDeployed, ReleaseStatus::HealthCheck] {
            assert_eq!(
                check_action(status, Action::Rollback, 0, 1, false, false),
                Ok(())
            );
        }
    }

    #[test]
    fn the_rollout_view_shows_only_the_buttons_the_state_allows() {
        use Action::*;
        let s = ReleaseStatus::HealthCheck;
        assert_eq!(
            allowed_actions(s, 0, 3, false, false),
            vec![Advance, Complete, Pause, Rollback]
        );
        assert_eq!(
            allowed_actions(s, 2, 3, false, false),
            vec![Complete, Pause, Rollback]
        );
        assert_eq!(
            allowed_actions(s, 0, 1, true, false),
            vec![Broaden, Pause, Rollback]
        );
        assert_eq!(
            allowed_actions(s, 0, 3, false, true),
            vec![Resume, Rollback]
        );
        assert_eq!(Advance.label(), "Advance next stage");
    }
}
