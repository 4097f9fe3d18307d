//! The scheduler's step: every in-flight release whose bake deadline passed gets its
//! current stage's gates evaluated, and the decision (advance, complete, hold, roll back)
//! applied by compare-and-set. The loop around it lives in the server; tests call
//! [`tick`] directly with the time they want. Deadlines live in the database, so a restart
//! resumes where it was.

use vf_rules::{evaluate_stage, on_bake_expired, Decision};

use super::actions::decision_name;
use super::inputs::{gate_inputs, InputError};
use super::state::{GateEvaluation, ReleaseRow, RELEASE_COLUMNS};
use super::transition::{apply, Step};
use crate::{Actor, Control, ControlError, Result};

/// The actor recorded for the scheduler's decisions.
pub const SCHEDULER: &str = "scheduler";

/// What one tick did to one release.
#[derive(Debug, Clone, PartialEq)]
pub struct TickOutcome {
    pub release_id: String,
    /// `advance`, `complete`, `hold`, `rollback`, or `lost-race` when someone else acted first.
    pub decision: String,
}

/// Evaluates every due release once. One failing release does not stop the others.
pub async fn tick(ctl: &Control, now: i64) -> Result<Vec<TickOutcome>> {
    let due = sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases
         WHERE status = 'CANARY_DEPLOYED' AND bake_deadline <= $1 ORDER BY bake_deadline"
    ))
    .bind(now)
    .fetch_all(&ctl.db.pool)
    .await?;
    let mut outcomes = Vec::new();
    for release in due {
        match decide(ctl, &release, now).await {
            Ok(decision) => outcomes.push(TickOutcome {
                release_id: release.id.clone(),
                decision,
            }),
            Err(ControlError::Conflict(_)) => outcomes.push(TickOutcome {
                release_id: release.id.clone(),
                decision: "lost-race".into(),
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

async fn decide(ctl: &Control, release: &ReleaseRow, now: i64) -> Result<String> {
    let plan = release.plan()?;
    let index = usize::try_from(release.current_stage).unwrap_or(0);
    let gates = plan.stage(index).map(|s| s.gates.as_slice()).unwrap_or(&[]);
    let inputs = match gate_inputs(ctl, release, &plan, now).await {
        Ok(inputs) => inputs,
        Err(e) => return hold_unjudged(ctl, release, e, now).await,
    };
    let results = evaluate_stage(gates, &inputs);
    let decision = on_bake_expired(&plan, index, &results);
    let name = decision_name(&decision).to_string();
    let evaluation = GateEvaluation {
        at: now,
        trigger: SCHEDULER.into(),
        actor: SCHEDULER.into(),
        results,
        decision: name.clone(),
    };
    apply(
        ctl,
        release,
        Step::Decided(decision),
        Some(evaluation),
        &Actor::system(SCHEDULER),
        now,
    )
    .await?;
    Ok(name)
}

/// A release whose gate inputs cannot be read is held for an operator with a reason naming
/// the input, instead of failing again on every tick: the log has the cause chain, and
/// `vectorflow_gate_input_errors_total` counts it.
async fn hold_unjudged(
    ctl: &Control,
    release: &ReleaseRow,
    e: InputError,
    now: i64,
) -> Result<String> {
    e.report(ctl, &release.id, "holding the release");
    let hold = Decision::Hold {
        reason: e.reason(&release.id),
    };
    let name = decision_name(&hold).to_string();
    apply(
        ctl,
        release,
        Step::Decided(hold),
        None,
        &Actor::system(SCHEDULER),
        now,
    )
    .await?;
    Ok(name)
}
