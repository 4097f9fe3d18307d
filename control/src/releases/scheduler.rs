//! The scheduler's step: every in-flight release whose bake deadline passed gets its
//! current stage's gates evaluated, and the decision (advance, complete, hold, roll back)
//! applied by compare-and-set. The loop around it lives in the server; tests call
//! [`tick`] directly with the time they want. Deadlines live in the database, so a restart
//! resumes where it was.

use vf_rules::{
    evaluate_stage, on_bake_expired, Decision, DecisionKind, GateEvaluation, ReleaseStatus, Step,
    Trigger,
};

use super::inputs::{gate_inputs, InputError};
use super::state::{ReadBy, Release, ReleaseRow, RELEASE_COLUMNS};
use super::transition::apply;
use crate::{Actor, Control, ControlError, Result};

/// The actor recorded for the scheduler's decisions.
pub const SCHEDULER: &str = "scheduler";

/// What one tick did to one release.
#[derive(Debug, Clone, PartialEq)]
pub struct TickOutcome {
    pub release_id: String,
    pub decision: Ticked,
}

/// The scheduler's part in one release's tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticked {
    /// It decided, and its transition committed.
    Decided(DecisionKind),
    /// Another replica or an operator changed the release first; nothing was written.
    LostRace,
}

impl Ticked {
    /// `advance`, `complete`, `hold`, `rollback`, or `lost-race`: the log's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Ticked::Decided(kind) => kind.as_str(),
            Ticked::LostRace => "lost-race",
        }
    }
}

/// Evaluates every due release once. One failing release does not stop the others; an
/// unreadable one is reported and skipped (it stays in flight, fenced to its previous
/// version, until an operator rolls it back or the row is repaired).
pub async fn tick(ctl: &Control, now: i64) -> Result<Vec<TickOutcome>> {
    let due = sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases
         WHERE status = $1 AND bake_deadline <= $2 ORDER BY bake_deadline"
    ))
    .bind(ReleaseStatus::CanaryDeployed.as_str())
    .bind(now)
    .fetch_all(&ctl.db.pool)
    .await?;
    let mut outcomes = Vec::new();
    for row in due {
        let release = match row.parse() {
            Ok(release) => release,
            Err(e) => {
                e.report(ctl, ReadBy::Scheduler);
                continue;
            }
        };
        match decide(ctl, &release, now).await {
            Ok(kind) => outcomes.push(TickOutcome {
                release_id: release.id.clone(),
                decision: Ticked::Decided(kind),
            }),
            Err(ControlError::Conflict(_)) => outcomes.push(TickOutcome {
                release_id: release.id.clone(),
                decision: Ticked::LostRace,
            }),
            Err(e) => tracing::error!(
                release_id = release.id,
                error = e.chain(),
                "scheduler could not decide a release"
            ),
        }
    }
    Ok(outcomes)
}

async fn decide(ctl: &Control, release: &Release, now: i64) -> Result<DecisionKind> {
    let plan = release.plan();
    let index = release.state.current_stage;
    let gates = plan.stage(index).map(|s| s.gates.as_slice()).unwrap_or(&[]);
    let (step, evaluation) = match gate_inputs(ctl, release, now).await {
        Ok(inputs) => {
            let results = evaluate_stage(gates, &inputs);
            let decision = on_bake_expired(plan, index, &results);
            let evaluation = GateEvaluation {
                at: now,
                trigger: Trigger::Scheduler,
                actor: SCHEDULER.into(),
                results,
                decision: decision.kind(),
            };
            (Step::Decided(decision), Some(evaluation))
        }
        Err(e) => (hold_unjudged(ctl, release, e), None),
    };
    let kind = step.kind();
    apply(
        ctl,
        release,
        step,
        evaluation,
        &Actor::system(SCHEDULER),
        now,
    )
    .await?;
    Ok(kind)
}

/// A release whose gate inputs cannot be read is held for an operator with a reason naming
/// the input, instead of failing again on every tick: the log has the cause chain, and
/// `vectorflow_gate_input_errors_total` counts it.
fn hold_unjudged(ctl: &Control, release: &Release, e: InputError) -> Step {
    e.report(ctl, &release.id, "holding the release");
    Step::Decided(Decision::Hold {
        reason: e.reason(&release.id),
    })
}
