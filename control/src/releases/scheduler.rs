//! The scheduler's step. Every baking release whose bake deadline passed gets its current
//! stage's gates evaluated, and the decision (advance, complete, hold, roll back) applied by
//! compare-and-set. Every baking release with a signal gate due for a check
//! (`vf_rules::checks`) gets those gates checked: the checks are stored, and a gate whose
//! failing checks reached its `failureLimit` rolls the release back (or holds it) at once.
//! The loop around it lives in the server; tests call [`tick`] directly with the time they
//! want. Deadlines and check times live in the database, so a restart resumes where it was.
//! Releases of an environment whose line is stopped are left alone; during a freeze window
//! a stage that passes is held for an operator (`vf_rules::freeze::hold_back`).

use vf_rules::{
    checks, crashed, evaluate, on_bake_expired, on_check_failed, stage_results_of, Decision,
    DecisionKind, Gate, GateEvaluation, GateResult, ReleaseStatus, Step, Trigger, Verdict,
};

use super::inputs::{gate_inputs, InputError};
use super::state::{ReadBy, Release, ReleaseRow, RELEASE_COLUMNS};
use super::transition::{apply, record_checks};
use crate::freeze::hold_of_pipeline;
use crate::{Actor, Control, ControlError, Result};
use vf_rules::freeze::hold_back;

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
    /// Gates were checked during the bake and none failed; the checks are stored.
    Checked,
    /// Another replica or an operator changed the release first; nothing was written.
    LostRace,
}

impl Ticked {
    /// `advance`, `complete`, `hold`, `rollback`, or `lost-race`: the log's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Ticked::Decided(kind) => kind.as_str(),
            Ticked::Checked => "checked",
            Ticked::LostRace => "lost-race",
        }
    }
}

/// Evaluates or checks every due release once. One failing release does not stop the others; an
/// unreadable one is reported and skipped (it stays in flight, fenced to its previous
/// version, until an operator rolls it back or the row is repaired).
pub async fn tick(ctl: &Control, now: i64) -> Result<Vec<TickOutcome>> {
    let due = sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases
         WHERE status = $1 AND paused IS NULL AND (bake_deadline <= $2 OR next_check_at <= $2)
           AND NOT EXISTS (SELECT 1 FROM pipelines p JOIN environments e
                           ON e.id = p.environment_id
                           WHERE p.id = releases.pipeline_id AND e.line_stopped IS NOT NULL)
         ORDER BY bake_deadline"
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
        let deadline_passed = release.state.bake_deadline.is_some_and(|d| d <= now);
        let ticked = if deadline_passed {
            decide(ctl, &release, now).await.map(Ticked::Decided)
        } else {
            check(ctl, &release, now).await
        };
        match ticked {
            Ok(decision) => outcomes.push(TickOutcome {
                release_id: release.id.clone(),
                decision,
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

fn stage_gates(release: &Release) -> &[Gate] {
    let index = release.state.current_stage;
    release
        .plan()
        .stage(index)
        .map(|s| s.gates.as_slice())
        .unwrap_or(&[])
}

/// The deadline: every gate is read once more (the final check of the signal gates, kept
/// with the others), settled by its `onNoData`, and the stage decided.
async fn decide(ctl: &Control, release: &Release, now: i64) -> Result<DecisionKind> {
    let plan = release.plan();
    let index = release.state.current_stage;
    let gates = stage_gates(release);
    let (step, evaluation, state) = match gate_inputs(ctl, release, gates, now).await {
        Ok(inputs) => {
            let raw: Vec<GateResult> = gates.iter().map(|g| evaluate(g, &inputs)).collect();
            let checked: Vec<(usize, GateResult)> = (raw.iter().enumerate())
                .filter(|(i, _)| gates[*i].watch().is_some())
                .map(|(i, result)| (i, result.clone()))
                .collect();
            for (_, result) in &checked {
                ctl.metrics.gate_check(result);
            }
            let (state, _) = release.state.record_checks(checked, now);
            let min_applied = plan.min_applied_percent(index);
            let results = stage_results_of(gates, raw, min_applied, &inputs);
            let decision = match on_bake_expired(plan, index, &results) {
                // During a freeze window a stage that passed is held for an operator.
                forward @ (Decision::StartStage(_) | Decision::Complete) => {
                    let hold = hold_of_pipeline(&ctl.db, &release.pipeline_id, now).await?;
                    hold_back(forward, index, hold.hold.freeze.as_ref())
                }
                decision => decision,
            };
            let evaluation = evaluated(now, results, &decision);
            (Step::Decided(decision), Some(evaluation), state)
        }
        Err(e) => (hold_unjudged(ctl, release, e), None, release.state.clone()),
    };
    let kind = step.kind();
    let checked = Release {
        state,
        ..release.clone()
    };
    apply(
        ctl,
        &checked,
        step,
        evaluation,
        &Actor::system(SCHEDULER),
        now,
    )
    .await?;
    Ok(kind)
}

/// During the bake: the gates due are checked and the checks stored; a gate whose failing
/// checks reached its limit fails the stage now, by the plan's `autoRollbackOnGateFail`.
/// Inputs that cannot be read are recorded as error checks (and logged and counted), so the
/// series shows the gap and the next check waits its interval.
async fn check(ctl: &Control, release: &Release, now: i64) -> Result<Ticked> {
    let gates = stage_gates(release);
    let due = match release.state.current() {
        Some(stage) => checks::due(gates, stage, now),
        None => Vec::new(),
    };
    let due_gates = due.iter().filter_map(|&i| gates.get(i));
    let (checked, crash) = match gate_inputs(ctl, release, due_gates, now).await {
        Ok(inputs) => {
            let checked: Vec<(usize, GateResult)> = (due.iter())
                .map(|&i| (i, evaluate(&gates[i], &inputs)))
                .collect();
            (checked, inputs.canary.as_ref().and_then(crashed))
        }
        Err(e) => {
            e.report(ctl, &release.id, "recording the check as an error");
            let reason = e.reason(&release.id);
            let checked = (due.iter())
                .map(|&i| (i, unread(&gates[i], &reason)))
                .collect();
            (checked, None)
        }
    };
    for result in checked.iter().map(|(_, r)| r).chain(&crash) {
        ctl.metrics.gate_check(result);
    }
    let (state, failed) = release.state.record_checks(checked.clone(), now);
    let checked_release = Release {
        state,
        ..release.clone()
    };
    if failed.is_empty() && crash.is_none() {
        record_checks(ctl, release, &checked_release.state).await?;
        return Ok(Ticked::Checked);
    }
    // The evaluation shows every gate checked now (the failed ones with their streak), then
    // a canary crash, which fails the stage whatever the gates say.
    let mut results: Vec<GateResult> = (checked.into_iter())
        .map(|(i, result)| match failed.iter().find(|(f, _)| *f == i) {
            Some((_, failed)) => failed.clone(),
            None => result,
        })
        .collect();
    let mut failing: Vec<GateResult> = failed.into_iter().map(|(_, r)| r).collect();
    results.extend(crash.clone());
    failing.extend(crash);
    let decision = on_check_failed(release.plan(), release.state.current_stage, &failing);
    let evaluation = evaluated(now, results, &decision);
    let kind = decision.kind();
    apply(
        ctl,
        &checked_release,
        Step::Decided(decision),
        Some(evaluation),
        &Actor::system(SCHEDULER),
        now,
    )
    .await?;
    Ok(Ticked::Decided(kind))
}

/// Asks the scheduler to check, at its next tick, the baking release of each pipeline whose
/// canary version a node reported crashed (`(pipeline, version)` pairs), in the caller's
/// transaction: a canary node's crash fails its stage at once rather than at the next
/// interval. A release already due is left alone, so an agent repeating its report on every
/// heartbeat does not rewrite the row (and bump the fleet generation) each time.
pub async fn check_soon(
    conn: &mut sqlx::AnyConnection,
    crashed: &[(&str, i64)],
    now: i64,
) -> Result<()> {
    for (pipeline, version) in crashed {
        sqlx::query(
            "UPDATE releases SET next_check_at = $1
             WHERE status = $2 AND pipeline_id = $3 AND canary_version = $4
               AND (next_check_at IS NULL OR next_check_at > $1)",
        )
        .bind(now)
        .bind(ReleaseStatus::CanaryDeployed.as_str())
        .bind(*pipeline)
        .bind(*version)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The scheduler's evaluation at `now` that led to `decision`.
fn evaluated(now: i64, results: Vec<GateResult>, decision: &Decision) -> GateEvaluation {
    GateEvaluation {
        at: now,
        trigger: Trigger::Scheduler,
        actor: SCHEDULER.into(),
        results,
        decision: decision.kind(),
    }
}

/// A check whose inputs could not be read.
fn unread(gate: &Gate, reason: &str) -> GateResult {
    GateResult {
        gate: gate.kind().to_owned(),
        verdict: Verdict::Error,
        observed: None,
        threshold: gate.threshold(),
        query: None,
        reason: reason.to_owned(),
    }
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
