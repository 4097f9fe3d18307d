//! A release's state as stored, and the one pure transition that applies a decision to it.
//!
//! [`ReleaseState::open`] starts a release with its first stage; [`ReleaseState::apply`]
//! takes the state, a [`Step`] (a [`Decision`] from [`super::on_bake_expired`] or
//! [`super::on_manual`], an operator's rollback, or a refusal to record) and, when the step
//! opens a stage, the nodes that stage adds, and returns the next state whole together with
//! what the caller must do besides storing it ([`Deploy`]). Both open stages through
//! [`open_stage`], so creating a release and advancing one cannot disagree.
//!
//! The caller reads the release, asks here, writes the result with a compare-and-set on the
//! row version and audits; it never edits a field of the state by hand.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{Action, Decision, ReleaseStatus};
use crate::checks::{self, GateChecks};
use crate::gates::GateResult;
use crate::plan::RolloutPlan;

/// How a started stage ended; absent while it bakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StageOutcome {
    Passed,
    Failed,
    Held,
}

/// Who asked for an evaluation of a stage's gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The bake deadline passed.
    Scheduler,
    Advance,
    Complete,
    Broaden,
    Rollback,
    Pause,
    Resume,
}

impl From<Action> for Trigger {
    fn from(action: Action) -> Trigger {
        match action {
            Action::Advance => Trigger::Advance,
            Action::Complete => Trigger::Complete,
            Action::Broaden => Trigger::Broaden,
            Action::Rollback => Trigger::Rollback,
            Action::Pause => Trigger::Pause,
            Action::Resume => Trigger::Resume,
        }
    }
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Scheduler => "scheduler",
            Trigger::Advance => "advance",
            Trigger::Complete => "complete",
            Trigger::Broaden => "broaden",
            Trigger::Rollback => "rollback",
            Trigger::Pause => "pause",
            Trigger::Resume => "resume",
        }
    }
}

/// What an evaluation led to: the kind of its [`Decision`], or a refused operator action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionKind {
    Advance,
    Complete,
    Hold,
    Rollback,
    Refused,
    Pause,
    Resume,
}

impl DecisionKind {
    /// The recorded spelling, also the suffix of the audit action (`release.advance`).
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Advance => "advance",
            DecisionKind::Complete => "complete",
            DecisionKind::Hold => "hold",
            DecisionKind::Rollback => "rollback",
            DecisionKind::Refused => "refused",
            DecisionKind::Pause => "pause",
            DecisionKind::Resume => "resume",
        }
    }
}

impl Decision {
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::StartStage(_) => DecisionKind::Advance,
            Decision::Complete => DecisionKind::Complete,
            Decision::Hold { .. } => DecisionKind::Hold,
            Decision::Rollback { .. } => DecisionKind::Rollback,
        }
    }
}

/// One evaluation of a stage's gates, with its evidence and what it led to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateEvaluation {
    pub at: i64,
    pub trigger: Trigger,
    /// `scheduler`, or the operator's name.
    pub actor: String,
    pub results: Vec<GateResult>,
    pub decision: DecisionKind,
}

/// An operator's pause: who, when, why, and how much of the bake was left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pause {
    pub at: i64,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The bake time left when paused; resume gives it back. `None` when no stage baked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bake_left_ms: Option<i64>,
    /// Paused because an admin stopped the environment's line: lifting the line resumes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub line_stop: bool,
}

/// The reason an operator gave for an action (rollback, complete, pause, resume, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    pub at: i64,
    pub actor: String,
    pub action: Trigger,
    pub reason: String,
}

/// Longest reason an operator may give.
pub const MAX_REASON_CHARS: usize = 500;

/// An operator's advance, complete or broaden that a gate refused. Kept apart from the
/// stage's evaluations: an early button press is not evidence about the canary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefusedAttempt {
    pub at: i64,
    pub actor: String,
    pub action: Trigger,
    /// The gate that refused, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    pub reason: String,
}

/// What is recorded when a stage starts, and every evaluation of its gates. The stored
/// JSON spelling (camelCase) is the database format: keep it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageState {
    /// 0-based; the rollout view shows it 1-based.
    pub index: usize,
    /// The node ids this stage added, materialised when it started, in id order.
    pub node_ids: Vec<String>,
    pub started_at: i64,
    pub bake_deadline: i64,
    /// The pipeline's events already counted in the minute the stage started, before it
    /// started: subtracted from the bake's throughput so earlier traffic never counts.
    #[serde(default)]
    pub start_minute_events: i64,
    #[serde(default)]
    pub evaluations: Vec<GateEvaluation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<StageOutcome>,
    /// The checks of each signal gate during the bake; see [`crate::checks`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<GateChecks>,
    /// Operator actions refused while this stage was current.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedAttempt>,
}

/// The nodes a stage adds when it opens, and the pipeline's events already counted in the
/// minute it opens. The caller computes both (selection needs the fleet, the count needs
/// the rollups); see [`crate::select::stage_additions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenedStage {
    pub node_ids: Vec<String>,
    pub start_minute_events: i64,
}

/// A release's state: everything the state machine reads and writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseState {
    pub status: ReleaseStatus,
    /// A plan-less canary: one stage, finishes with *Broaden*. See [`super::check_action`].
    pub planless: bool,
    pub plan: RolloutPlan,
    /// One entry per started stage, in order; never empty.
    pub stages: Vec<StageState>,
    /// The index of the last started stage.
    pub current_stage: usize,
    /// The current stage's bake deadline while it bakes; kept (stale) once decided.
    pub bake_deadline: Option<i64>,
    /// Why the release waits in `HEALTH_CHECK`.
    pub hold_reason: Option<String>,
    /// Why the release was rolled back.
    pub failure_reason: Option<String>,
    pub completed_at: Option<i64>,
    /// Set while an operator has paused the release: the bake clock stands still and the
    /// scheduler neither checks nor decides it.
    pub paused: Option<Pause>,
    /// The reasons operators gave, oldest first.
    pub notes: Vec<Note>,
}

/// What to do with a release: a decision, or an operator action refused by a failing gate
/// (recorded as a refused attempt; nothing else changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Decided(Decision),
    Refused(RefusedAttempt),
    /// An operator pauses the release (with an optional reason); `line_stop` when it pauses
    /// because the environment's line was stopped.
    Pause {
        by: String,
        reason: Option<String>,
        line_stop: bool,
    },
    Resume {
        by: String,
    },
}

impl Step {
    pub fn kind(&self) -> DecisionKind {
        match self {
            Step::Decided(decision) => decision.kind(),
            Step::Refused(_) => DecisionKind::Refused,
            Step::Pause { .. } => DecisionKind::Pause,
            Step::Resume { .. } => DecisionKind::Resume,
        }
    }

    /// The stage this step opens, for which the caller must pass an [`OpenedStage`].
    pub fn opens(&self) -> Option<usize> {
        match self {
            Step::Decided(Decision::StartStage(index)) => Some(*index),
            _ => None,
        }
    }
}

/// What the deployed version of the pipeline becomes, besides the release row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deploy {
    /// Unchanged.
    Nothing,
    /// Complete: the canary version is deployed.
    Canary,
    /// Rollback: the previous version's config is deployed again (or, on a first deploy,
    /// the pipeline is undeployed).
    Previous,
}

/// The result of [`ReleaseState::apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub state: ReleaseState,
    pub kind: DecisionKind,
    /// For the audit log and the server log: the stage started, the reason held, ...
    pub reason: String,
    pub deploy: Deploy,
}

/// A step that cannot apply to this state: a bug in the caller or a stale read, never an
/// operator's mistake (those are [`super::Refusal`]s, checked before).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("the release is {0}, not in flight")]
    NotInFlight(ReleaseStatus),
    #[error("stage {0} is not in the plan")]
    NoSuchStage(usize),
    #[error("stage {0} opens without the nodes it adds")]
    NoOpenedStage(usize),
    #[error("stage {got} cannot open after stage {current}: stages open in order")]
    OutOfOrder { current: usize, got: usize },
    #[error("the release is already paused")]
    AlreadyPaused,
    #[error("the release is not paused")]
    NotPaused,
}

/// A stage's state as it opens at `now`: the one place a stage starts.
pub fn open_stage(
    plan: &RolloutPlan,
    index: usize,
    opened: OpenedStage,
    now: i64,
) -> Option<StageState> {
    let stage = plan.stage(index)?;
    Some(StageState {
        index,
        node_ids: opened.node_ids,
        started_at: now,
        bake_deadline: stage.bake.deadline_ms(now),
        start_minute_events: opened.start_minute_events,
        evaluations: Vec::new(),
        outcome: None,
        checks: Vec::new(),
        refused: Vec::new(),
    })
}

impl ReleaseState {
    /// A new release baking its first stage.
    pub fn open(plan: RolloutPlan, planless: bool, first: OpenedStage, now: i64) -> ReleaseState {
        // A plan always has a first stage (parsing guarantees 1..=20).
        let stages: Vec<StageState> = open_stage(&plan, 0, first, now).into_iter().collect();
        ReleaseState {
            status: ReleaseStatus::CanaryDeployed,
            planless,
            bake_deadline: stages.first().map(|s| s.bake_deadline),
            plan,
            stages,
            current_stage: 0,
            hold_reason: None,
            failure_reason: None,
            completed_at: None,
            paused: None,
            notes: Vec::new(),
        }
    }

    pub fn in_flight(&self) -> bool {
        self.status.in_flight()
    }

    /// Every node any started stage targeted: the fencing set.
    pub fn targeted(&self) -> BTreeSet<String> {
        self.stages
            .iter()
            .flat_map(|s| s.node_ids.iter().cloned())
            .collect()
    }

    /// The current stage's evaluations and outcome live on this entry.
    pub fn current(&self) -> Option<&StageState> {
        self.stages.get(self.current_stage)
    }

    /// The buttons the state allows (before roles are considered).
    pub fn allowed_actions(&self) -> Vec<Action> {
        super::allowed_actions(
            self.status,
            self.current_stage,
            self.plan.stages().len(),
            self.planless,
            self.paused.is_some(),
        )
    }

    /// The next time a signal gate of the baking stage is due for a check; `None` when the
    /// release is not baking or no check remains before the deadline.
    pub fn next_check_at(&self) -> Option<i64> {
        if !self.status.baking() || self.paused.is_some() {
            return None;
        }
        let gates = &self.plan.stage(self.current_stage)?.gates;
        checks::next_check_at(gates, self.current()?)
    }

    /// The state with `results` (a gate's position in the current stage and its check)
    /// recorded as checks at `now`, and the gates whose failing checks reached their limit.
    pub fn record_checks(
        &self,
        results: Vec<(usize, GateResult)>,
        now: i64,
    ) -> (ReleaseState, Vec<(usize, GateResult)>) {
        let mut next = self.clone();
        let gates = self
            .plan
            .stage(self.current_stage)
            .map(|s| s.gates.as_slice())
            .unwrap_or(&[]);
        let failed = match next.stages.get_mut(self.current_stage) {
            Some(stage) => checks::record(stage, gates, results, now),
            None => Vec::new(),
        };
        (next, failed)
    }

    /// [`ReleaseState::apply`] with the reason an operator gave, kept in `notes`.
    pub fn apply_noted(
        &self,
        step: &Step,
        evaluation: Option<GateEvaluation>,
        opened: Option<OpenedStage>,
        note: Option<Note>,
        now: i64,
    ) -> Result<Transition, TransitionError> {
        let mut t = self.apply(step, evaluation, opened, now)?;
        t.state.notes.extend(note);
        Ok(t)
    }

    /// Applies `step` at `now`. `evaluation` (the gates just read, if any) is recorded on
    /// the current stage; `opened` must be given when the step opens a stage.
    pub fn apply(
        &self,
        step: &Step,
        evaluation: Option<GateEvaluation>,
        opened: Option<OpenedStage>,
        now: i64,
    ) -> Result<Transition, TransitionError> {
        if !self.in_flight() {
            return Err(TransitionError::NotInFlight(self.status));
        }
        match step {
            Step::Pause { .. } | Step::Resume { .. } => return self.pause_or_resume(step, now),
            Step::Decided(_) | Step::Refused(_) => {}
        }
        let mut next = self.clone();
        let evaluated = evaluation.is_some();
        let current = next.current_stage;
        if let Some(stage) = next.stages.get_mut(current) {
            match step {
                // A refused button press is not evidence: it never becomes an evaluation.
                Step::Refused(attempt) => stage.refused.push(attempt.clone()),
                Step::Decided(_) | Step::Pause { .. } | Step::Resume { .. } => {
                    stage.evaluations.extend(evaluation)
                }
            }
        }
        let mut decide_current = |outcome: StageOutcome| {
            if let Some(stage) = next.stages.get_mut(current) {
                stage.outcome = Some(outcome);
            }
        };
        let (reason, deploy) = match step {
            Step::Refused(attempt) => (attempt.reason.clone(), Deploy::Nothing),
            // Handled by `pause_or_resume` above.
            Step::Pause { .. } | Step::Resume { .. } => (String::new(), Deploy::Nothing),
            Step::Decided(Decision::StartStage(index)) => {
                if *index != current + 1 {
                    return Err(TransitionError::OutOfOrder {
                        current,
                        got: *index,
                    });
                }
                let opened = opened.ok_or(TransitionError::NoOpenedStage(*index))?;
                let stage = open_stage(&self.plan, *index, opened, now)
                    .ok_or(TransitionError::NoSuchStage(*index))?;
                decide_current(StageOutcome::Passed);
                next.bake_deadline = Some(stage.bake_deadline);
                next.stages.push(stage);
                next.status = ReleaseStatus::CanaryDeployed;
                next.current_stage = *index;
                next.hold_reason = None;
                (format!("stage {} started", index + 1), Deploy::Nothing)
            }
            Step::Decided(Decision::Complete) => {
                decide_current(StageOutcome::Passed);
                next.status = ReleaseStatus::Broadened;
                next.hold_reason = None;
                next.completed_at = Some(now);
                next.paused = None;
                (
                    "every node converges on the canary version".to_owned(),
                    Deploy::Canary,
                )
            }
            Step::Decided(Decision::Hold { reason }) => {
                decide_current(StageOutcome::Held);
                next.status = ReleaseStatus::HealthCheck;
                next.hold_reason = Some(reason.clone());
                (reason.clone(), Deploy::Nothing)
            }
            Step::Decided(Decision::Rollback { reason }) => {
                // An operator's rollback judges no gate: the stage keeps no outcome.
                if evaluated {
                    decide_current(StageOutcome::Failed);
                }
                next.status = ReleaseStatus::RolledBack;
                next.hold_reason = None;
                next.failure_reason = Some(reason.clone());
                next.completed_at = Some(now);
                next.paused = None;
                (reason.clone(), Deploy::Previous)
            }
        };
        Ok(Transition {
            state: next,
            kind: step.kind(),
            reason,
            deploy,
        })
    }
}

impl ReleaseState {
    /// Pausing stops the bake clock (the time left is kept) and resuming gives it back from
    /// `now`: the stage's deadline moves by exactly the paused time.
    fn pause_or_resume(&self, step: &Step, now: i64) -> Result<Transition, TransitionError> {
        let mut next = self.clone();
        let baking = self.status.baking();
        let reason = match (step, &self.paused) {
            (Step::Pause { .. }, Some(_)) => return Err(TransitionError::AlreadyPaused),
            (Step::Resume { .. }, None) => return Err(TransitionError::NotPaused),
            (
                Step::Pause {
                    by,
                    reason,
                    line_stop,
                },
                None,
            ) => {
                let bake_left_ms = (self.bake_deadline)
                    .filter(|_| baking)
                    .map(|d| (d - now).max(0));
                next.paused = Some(Pause {
                    at: now,
                    by: by.clone(),
                    reason: reason.clone(),
                    bake_left_ms,
                    line_stop: *line_stop,
                });
                format!("paused by {by}")
            }
            (Step::Resume { by }, Some(pause)) => {
                next.paused = None;
                if let Some(left) = pause.bake_left_ms {
                    let deadline = now.saturating_add(left);
                    next.bake_deadline = Some(deadline);
                    if let Some(stage) = next.stages.get_mut(next.current_stage) {
                        stage.bake_deadline = deadline;
                    }
                }
                let minutes = (now - pause.at).max(0) / 60_000;
                format!("resumed by {by} after {minutes} min paused")
            }
            (Step::Decided(_) | Step::Refused(_), _) => unreachable!("only pause and resume"),
        };
        Ok(Transition {
            state: next,
            kind: step.kind(),
            reason,
            deploy: Deploy::Nothing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const T0: i64 = 1_700_000_000_000;

    fn plan(stages: usize) -> RolloutPlan {
        let stage = json!({"selector": {"percentage": 10}, "bakeSeconds": 60, "gates": []});
        RolloutPlan::parse(&json!({"stages": vec![stage; stages]})).expect("valid plan")
    }

    fn nodes(ids: &[&str]) -> OpenedStage {
        OpenedStage {
            node_ids: ids.iter().map(|s| s.to_string()).collect(),
            start_minute_events: 7,
        }
    }

    fn started() -> ReleaseState {
        ReleaseState::open(plan(3), false, nodes(&["a"]), T0)
    }

    fn evaluation(decision: DecisionKind) -> GateEvaluation {
        GateEvaluation {
            at: T0 + 60_000,
            trigger: Trigger::Scheduler,
            actor: "scheduler".into(),
            results: Vec::new(),
            decision,
        }
    }

    fn hold(reason: &str) -> Step {
        Step::Decided(Decision::Hold {
            reason: reason.into(),
        })
    }

    fn rollback() -> Step {
        Step::Decided(Decision::Rollback {
            reason: "stage 1 failed".into(),
        })
    }

    #[test]
    fn a_new_release_bakes_its_first_stage() {
        let s = started();
        assert_eq!(s.status, ReleaseStatus::CanaryDeployed);
        assert_eq!(s.current_stage, 0);
        assert_eq!(s.bake_deadline, Some(T0 + 60_000));
        assert_eq!(s.stages.len(), 1);
        assert_eq!(s.stages[0].node_ids, ["a"]);
        assert_eq!(s.stages[0].start_minute_events, 7);
        assert_eq!(s.targeted(), BTreeSet::from(["a".to_string()]));
    }

    #[test]
    fn advancing_passes_the_current_stage_and_opens_the_next_one_the_same_way_create_did() {
        let now = T0 + 60_000;
        let t = started()
            .apply(
                &Step::Decided(Decision::StartStage(1)),
                Some(evaluation(DecisionKind::Advance)),
                Some(nodes(&["b", "c"])),
                now,
            )
            .expect("applies");
        assert_eq!(t.kind, DecisionKind::Advance);
        assert_eq!(t.reason, "stage 2 started");
        assert_eq!(t.deploy, Deploy::Nothing);
        let s = t.state;
        assert_eq!(s.stages[0].outcome, Some(StageOutcome::Passed));
        assert_eq!(s.stages[0].evaluations.len(), 1);
        assert_eq!(
            s.stages[1],
            open_stage(&plan(3), 1, nodes(&["b", "c"]), now).expect("stage 2")
        );
        assert_eq!((s.current_stage, s.bake_deadline), (1, Some(now + 60_000)));
        assert_eq!(s.targeted().len(), 3);
    }

    #[test]
    fn opening_a_stage_needs_its_nodes_and_a_stage_in_the_plan() {
        let s = started();
        assert_eq!(
            s.apply(&Step::Decided(Decision::StartStage(1)), None, None, T0),
            Err(TransitionError::NoOpenedStage(1))
        );
        assert_eq!(
            s.apply(
                &Step::Decided(Decision::StartStage(2)),
                None,
                Some(nodes(&[])),
                T0
            ),
            Err(TransitionError::OutOfOrder { current: 0, got: 2 })
        );
        let one_stage = ReleaseState::open(plan(1), false, nodes(&["a"]), T0);
        assert_eq!(
            one_stage.apply(
                &Step::Decided(Decision::StartStage(1)),
                None,
                Some(nodes(&[])),
                T0
            ),
            Err(TransitionError::NoSuchStage(1))
        );
    }

    #[test]
    fn a_hold_waits_with_its_reason_and_an_advance_clears_it() {
        let held = started()
            .apply(
                &hold("waiting"),
                Some(evaluation(DecisionKind::Hold)),
                None,
                T0,
            )
            .expect("applies")
            .state;
        assert_eq!(held.status, ReleaseStatus::HealthCheck);
        assert_eq!(held.hold_reason.as_deref(), Some("waiting"));
        assert_eq!(held.stages[0].outcome, Some(StageOutcome::Held));
        let advanced = held
            .apply(
                &Step::Decided(Decision::StartStage(1)),
                None,
                Some(nodes(&["b"])),
                T0,
            )
            .expect("applies")
            .state;
        assert_eq!(advanced.status, ReleaseStatus::CanaryDeployed);
        assert_eq!(advanced.hold_reason, None);
        assert_eq!(advanced.stages[0].outcome, Some(StageOutcome::Passed));
    }

    #[test]
    fn complete_deploys_the_canary_and_ends_the_release() {
        let t = started()
            .apply(&Step::Decided(Decision::Complete), None, None, T0 + 5)
            .expect("applies");
        assert_eq!(t.deploy, Deploy::Canary);
        assert_eq!(t.state.status, ReleaseStatus::Broadened);
        assert_eq!(t.state.completed_at, Some(T0 + 5));
        assert!(!t.state.in_flight());
        assert!(t.state.allowed_actions().is_empty());
    }

    #[test]
    fn a_gate_rollback_fails_the_stage_and_an_operator_rollback_judges_nothing() {
        let by_gate = started()
            .apply(
                &rollback(),
                Some(evaluation(DecisionKind::Rollback)),
                None,
                T0,
            )
            .expect("applies");
        assert_eq!(by_gate.deploy, Deploy::Previous);
        assert_eq!(by_gate.state.stages[0].outcome, Some(StageOutcome::Failed));
        assert_eq!(
            by_gate.state.failure_reason.as_deref(),
            Some("stage 1 failed")
        );
        let by_operator = started()
            .apply(&rollback(), None, None, T0)
            .expect("applies");
        assert_eq!(by_operator.state.stages[0].outcome, None);
        assert_eq!(by_operator.state.status, ReleaseStatus::RolledBack);
    }

    fn refused(reason: &str) -> Step {
        Step::Refused(RefusedAttempt {
            at: T0 + 3_000,
            actor: "ops@example.com".into(),
            action: Trigger::Advance,
            gate: Some("healthWindow".into()),
            reason: reason.into(),
        })
    }

    #[test]
    fn a_refusal_is_kept_as_an_attempt_never_as_the_stages_evaluation() {
        let s = started();
        let step = refused("healthWindow gate failed: bake window has not elapsed: 57s left");
        let t = s
            .apply(&step, Some(evaluation(DecisionKind::Refused)), None, T0)
            .expect("applies");
        assert_eq!(t.kind, DecisionKind::Refused);
        assert_eq!(t.deploy, Deploy::Nothing);
        let mut expected = s.clone();
        let Step::Refused(attempt) = step else {
            unreachable!()
        };
        expected.stages[0].refused.push(attempt);
        assert_eq!(t.state, expected);
        assert!(t.state.stages[0].evaluations.is_empty());
    }

    #[test]
    fn checks_are_recorded_on_the_current_stage_and_set_the_next_check_time() {
        let plan = RolloutPlan::parse(&json!({"stages": [{
            "selector": {"percentage": 10}, "bakeSeconds": 60,
            "gates": [{"errorRate": {"maxPercent": 1, "intervalSeconds": 10}}],
        }]}))
        .expect("valid plan");
        let s = ReleaseState::open(plan, false, nodes(&["a"]), T0);
        assert_eq!(s.next_check_at(), Some(T0 + 10_000));
        let result = crate::gates::error_rate(1.0, crate::Scope::Cumulative, None);
        let (checked, failed) = s.record_checks(vec![(0, result)], T0 + 10_000);
        assert!(failed.is_empty(), "an inconclusive check fails nothing");
        assert_eq!(checked.stages[0].checks[0].total, 1);
        assert_eq!(checked.next_check_at(), Some(T0 + 20_000));
        let held = checked
            .apply(&hold("held"), None, None, T0 + 20_000)
            .expect("applies");
        assert_eq!(
            held.state.next_check_at(),
            None,
            "only a baking stage is checked"
        );
    }

    #[test]
    fn a_pause_keeps_the_bake_left_and_resume_gives_it_back() {
        let s = started();
        let pause = Step::Pause {
            by: "ann".into(),
            reason: Some("waiting for the DB team".into()),
            line_stop: false,
        };
        let paused = s
            .apply(&pause, None, None, T0 + 20_000)
            .expect("pauses")
            .state;
        assert_eq!(
            paused.paused.as_ref().and_then(|p| p.bake_left_ms),
            Some(40_000)
        );
        assert_eq!(paused.next_check_at(), None);
        assert_eq!(paused.allowed_actions(), [Action::Resume, Action::Rollback]);
        assert_eq!(
            paused.apply(&pause, None, None, T0 + 21_000),
            Err(TransitionError::AlreadyPaused)
        );
        let resume = Step::Resume { by: "bob".into() };
        let t = paused
            .apply(&resume, None, None, T0 + 20_000 + 12 * 60_000)
            .expect("resumes");
        assert_eq!(t.reason, "resumed by bob after 12 min paused");
        let resumed = t.state;
        assert_eq!(resumed.paused, None);
        let deadline = T0 + 20_000 + 12 * 60_000 + 40_000;
        assert_eq!(resumed.bake_deadline, Some(deadline));
        assert_eq!(resumed.stages[0].bake_deadline, deadline);
        assert_eq!(
            resumed.apply(&resume, None, None, T0),
            Err(TransitionError::NotPaused)
        );
        // A rollback ends a pause.
        let rolled = paused
            .apply(&rollback(), None, None, T0 + 30_000)
            .expect("rolls back");
        assert_eq!(rolled.state.paused, None);
    }

    #[test]
    fn an_operators_reason_is_kept_with_the_transition() {
        let note = Note {
            at: T0,
            actor: "ann".into(),
            action: Trigger::Rollback,
            reason: "customer escalation".into(),
        };
        let t = started()
            .apply_noted(&rollback(), None, None, Some(note.clone()), T0)
            .expect("applies");
        assert_eq!(t.state.notes, [note]);
    }

    #[test]
    fn nothing_applies_once_the_release_left_flight() {
        let done = started()
            .apply(&Step::Decided(Decision::Complete), None, None, T0)
            .expect("applies")
            .state;
        assert_eq!(
            done.apply(&rollback(), None, None, T0),
            Err(TransitionError::NotInFlight(ReleaseStatus::Broadened))
        );
    }

    #[test]
    fn the_stored_spelling_is_unchanged() {
        let mut s = started();
        s.stages[0].evaluations.push(evaluation(DecisionKind::Hold));
        s.stages[0].outcome = Some(StageOutcome::Held);
        let stored = serde_json::to_value(&s.stages).expect("serialises");
        assert_eq!(
            stored,
            json!([{
                "index": 0, "nodeIds": ["a"], "startedAt": T0, "bakeDeadline": T0 + 60_000,
                "startMinuteEvents": 7, "outcome": "held",
                "evaluations": [{"at": T0 + 60_000, "trigger": "scheduler", "actor": "scheduler",
                    "results": [], "decision": "hold"}],
            }])
        );
        let status = serde_json::to_value(ReleaseStatus::HealthCheck).expect("serialises");
        assert_eq!(status, json!("HEALTH_CHECK"));
        let back: ReleaseState =
            serde_json::from_value(serde_json::to_value(&s).expect("serialises")).expect("reads");
        assert_eq!(back, s);
    }

    #[test]
    fn an_unknown_outcome_or_decision_does_not_read() {
        let bad = json!([{"index": 0, "nodeIds": [], "startedAt": 0, "bakeDeadline": 0,
            "outcome": "maybe"}]);
        assert!(serde_json::from_value::<Vec<StageState>>(bad).is_err());
    }

    fn any_step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0usize..4).prop_map(|i| Step::Decided(Decision::StartStage(i))),
            Just(Step::Decided(Decision::Complete)),
            Just(hold("held")),
            Just(rollback()),
            Just(refused("refused")),
            Just(Step::Pause {
                by: "ann".into(),
                reason: None,
                line_stop: false,
            }),
            Just(Step::Resume { by: "ann".into() }),
        ]
    }

    proptest! {
        /// Whatever sequence of steps arrives, the state stays coherent: stages are in
        /// order with the current one last, the targeted set only grows while in flight, a
        /// left release never changes again, and exactly the terminal statuses carry
        /// `completed_at`.
        #[test]
        fn any_sequence_of_steps_keeps_the_state_coherent(
            steps in proptest::collection::vec((any_step(), any::<bool>(), 0i64..1_000_000), 1..12)
        ) {
            let mut state = started();
            let mut now = T0;
            for (step, evaluated, dt) in steps {
                now += dt;
                let eval = evaluated.then(|| evaluation(step.kind()));
                let opened = step.opens().map(|i| nodes(&[&format!("n{i}-{now}")]));
                match state.apply(&step, eval, opened, now) {
                    Ok(t) => {
                        prop_assert!(state.in_flight());
                        prop_assert!(t.state.targeted().is_superset(&state.targeted()));
                        prop_assert_eq!(t.state.completed_at.is_some(), !t.state.in_flight());
                        prop_assert_eq!(t.state.current_stage + 1, t.state.stages.len());
                        for (i, s) in t.state.stages.iter().enumerate() {
                            prop_assert_eq!(s.index, i);
                        }
                        state = t.state;
                    }
                    Err(TransitionError::NotInFlight(_)) => prop_assert!(!state.in_flight()),
                    Err(TransitionError::NoSuchStage(i)) => prop_assert!(i >= 3),
                    Err(TransitionError::OutOfOrder { current, got }) => {
                        prop_assert_eq!(current, state.current_stage);
                        prop_assert_ne!(got, current + 1);
                    }
                    Err(TransitionError::NoOpenedStage(_)) => prop_assert!(false, "nodes were given"),
                    Err(TransitionError::AlreadyPaused | TransitionError::NotPaused) => {}
                }
            }
        }
    }
}
