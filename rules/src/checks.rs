//! Checks during a bake: when each signal gate (`errorRate`, `throughputDrop`,
//! `customPromQL`) is due, how its checks are kept, and when failing checks fail the gate
//! before the deadline.
//!
//! - A gate is checked every `intervalSeconds` from the stage's start while the stage bakes;
//!   the deadline's evaluation is its final check (see [`crate::release::on_bake_expired`]).
//! - A failing check adds one to the gate's failing streak and a passing one resets it;
//!   inconclusive and error checks leave it as it was, so a blip of missing data neither
//!   fails a gate nor hides failures around it.
//! - When the streak reaches the gate's `failureLimit`, the gate has failed: the caller acts
//!   at once ([`crate::release::on_check_failed`]) instead of waiting for the deadline.
//! - Each gate keeps its last [`KEPT`] checks as `[at, value, verdict]` triples, its check
//!   count and the last check in full, so the stage card can show the live value beside the
//!   threshold and a small series without the state growing with the bake.

use serde::{Deserialize, Serialize};

use crate::gates::{GateResult, Verdict};
use crate::plan::Gate;
use crate::release::StageState;

/// Checks kept per gate and stage: ten minutes at the shortest interval.
pub const KEPT: usize = 60;

/// One check, stored as `[at, value, "verdict"]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Check(pub i64, pub Option<f64>, pub Verdict);

/// The checks of one gate of one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateChecks {
    /// The gate's position in the stage's `gates`.
    pub index: usize,
    /// The most recent checks, oldest first; at most [`KEPT`].
    pub series: Vec<Check>,
    /// Checks run in this stage, including those no longer in `series`.
    pub total: u32,
    /// Consecutive failing checks up to now.
    pub failing_streak: u32,
    /// The last check with its evidence.
    pub last: GateResult,
}

impl GateChecks {
    pub fn last_at(&self) -> Option<i64> {
        self.series.last().map(|check| check.0)
    }
}

/// When gate `index` of `gates` is next due: one interval after its last check, or after
/// the stage started. `None` for a gate without checks (`healthWindow`).
pub fn next_due(gates: &[Gate], stage: &StageState, index: usize) -> Option<i64> {
    let watch = gates.get(index)?.watch()?;
    let last = stage
        .checks
        .iter()
        .find(|c| c.index == index)
        .and_then(GateChecks::last_at)
        .unwrap_or(stage.started_at);
    Some(last.saturating_add(watch.interval_ms()))
}

/// The gates due for a check at `now`, in plan order. Nothing is due once the bake
/// deadline is reached: the deadline's evaluation is the final check.
pub fn due(gates: &[Gate], stage: &StageState, now: i64) -> Vec<usize> {
    if now >= stage.bake_deadline {
        return Vec::new();
    }
    (0..gates.len())
        .filter(|&index| next_due(gates, stage, index).is_some_and(|at| at <= now))
        .collect()
}

/// The next time any gate is due before the bake deadline; `None` when no check remains.
pub fn next_check_at(gates: &[Gate], stage: &StageState) -> Option<i64> {
    (0..gates.len())
        .filter_map(|index| next_due(gates, stage, index))
        .filter(|&at| at < stage.bake_deadline)
        .min()
}

/// Records `checks` (a gate's position and its result) on `stage` at `now`, and returns
/// the gates whose failing streak reached their `failureLimit` (position and result, with
/// the streak in the reason). Positions without a checked gate are ignored.
pub fn record(
    stage: &mut StageState,
    gates: &[Gate],
    checks: Vec<(usize, GateResult)>,
    now: i64,
) -> Vec<(usize, GateResult)> {
    let mut failed = Vec::new();
    for (index, result) in checks {
        let Some(watch) = gates.get(index).and_then(Gate::watch) else {
            continue;
        };
        let position = match stage.checks.iter().position(|c| c.index == index) {
            Some(position) => position,
            None => {
                stage.checks.push(GateChecks {
                    index,
                    series: Vec::new(),
                    total: 0,
                    failing_streak: 0,
                    last: result.clone(),
                });
                stage.checks.len() - 1
            }
        };
        let kept = &mut stage.checks[position];
        kept.series
            .push(Check(now, result.observed, result.verdict));
        if kept.series.len() > KEPT {
            kept.series.remove(0);
        }
        kept.total = kept.total.saturating_add(1);
        kept.failing_streak = match result.verdict {
            Verdict::Fail => kept.failing_streak.saturating_add(1),
            Verdict::Pass | Verdict::Skipped => 0,
            Verdict::Inconclusive | Verdict::Error => kept.failing_streak,
        };
        kept.last = result.clone();
        if result.verdict == Verdict::Fail && kept.failing_streak >= watch.failure_limit {
            let mut result = result;
            if watch.failure_limit > 1 {
                let streak = kept.failing_streak;
                result.reason = format!("{} ({streak} failing checks in a row)", result.reason);
            }
            failed.push((index, result));
        }
    }
    stage.checks.sort_by_key(|c| c.index);
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Comparator, OnNoData, Watch};
    use crate::release::{open_stage, OpenedStage};
    use crate::RolloutPlan;
    use serde_json::json;

    const T0: i64 = 1_700_000_000_000;

    fn plan(failure_limit: u32) -> RolloutPlan {
        RolloutPlan::parse(&json!({"stages": [{
            "selector": {"percentage": 10},
            "bakeSeconds": 120,
            "gates": [
                {"healthWindow": {}},
                {"errorRate": {"maxPercent": 1, "intervalSeconds": 10, "failureLimit": failure_limit}},
                {"customPromQL": {"query": "up", "comparator": "gte", "threshold": 1}},
            ],
        }]}))
        .expect("valid plan")
    }

    fn stage(plan: &RolloutPlan) -> StageState {
        open_stage(plan, 0, OpenedStage::default(), T0).expect("stage 0")
    }

    fn check(verdict: Verdict, observed: Option<f64>) -> GateResult {
        GateResult {
            gate: "errorRate".into(),
            verdict,
            observed,
            threshold: Some(1.0),
            query: None,
            reason: format!("{verdict:?}"),
        }
    }

    #[test]
    fn each_signal_gate_is_due_one_interval_after_the_start_or_its_last_check() {
        let plan = plan(1);
        let gates = &plan.stages()[0].gates;
        let mut stage = stage(&plan);
        assert!(due(gates, &stage, T0 + 9_999).is_empty());
        assert_eq!(due(gates, &stage, T0 + 10_000), [1]);
        // customPromQL takes the default 30 s; healthWindow is never checked during the bake.
        assert_eq!(due(gates, &stage, T0 + 30_000), [1, 2]);
        record(
            &mut stage,
            gates,
            vec![(1, check(Verdict::Pass, Some(0.0)))],
            T0 + 10_500,
        );
        assert_eq!(next_due(gates, &stage, 1), Some(T0 + 20_500));
        assert_eq!(next_check_at(gates, &stage), Some(T0 + 20_500));
        assert_eq!(next_due(gates, &stage, 0), None);
    }

    #[test]
    fn nothing_is_due_at_or_after_the_deadline_which_makes_the_final_check() {
        let plan = plan(1);
        let gates = &plan.stages()[0].gates;
        let stage = stage(&plan);
        assert_eq!(due(gates, &stage, T0 + 119_999), [1, 2]);
        assert!(due(gates, &stage, T0 + 120_000).is_empty());
        let mut late = stage.clone();
        record(
            &mut late,
            gates,
            vec![(1, check(Verdict::Pass, None))],
            T0 + 115_000,
        );
        record(
            &mut late,
            gates,
            vec![(2, check(Verdict::Pass, None))],
            T0 + 115_000,
        );
        assert_eq!(next_check_at(gates, &late), None);
    }

    #[test]
    fn a_gate_fails_when_consecutive_failing_checks_reach_its_limit() {
        let plan = plan(3);
        let gates = &plan.stages()[0].gates;
        let mut stage = stage(&plan);
        let mut run = |verdict, at| record(&mut stage, gates, vec![(1, check(verdict, None))], at);
        assert!(run(Verdict::Fail, T0 + 10_000).is_empty());
        assert!(run(Verdict::Fail, T0 + 20_000).is_empty());
        // A pass resets the streak.
        assert!(run(Verdict::Pass, T0 + 30_000).is_empty());
        assert!(run(Verdict::Fail, T0 + 40_000).is_empty());
        // Inconclusive and error checks neither count nor reset.
        assert!(run(Verdict::Inconclusive, T0 + 50_000).is_empty());
        assert!(run(Verdict::Fail, T0 + 60_000).is_empty());
        assert!(run(Verdict::Error, T0 + 70_000).is_empty());
        let failed = run(Verdict::Fail, T0 + 80_000);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].1.reason, "Fail (3 failing checks in a row)");
        assert_eq!(stage.checks[0].total, 8);
        assert_eq!(stage.checks[0].failing_streak, 3);
    }

    #[test]
    fn with_the_default_limit_one_failing_check_fails_the_gate() {
        let plan = plan(1);
        let gates = &plan.stages()[0].gates;
        let mut stage = stage(&plan);
        let failed = record(
            &mut stage,
            gates,
            vec![(1, check(Verdict::Fail, Some(50.0)))],
            T0,
        );
        assert_eq!(failed[0], (1, check(Verdict::Fail, Some(50.0))));
        assert_eq!(
            stage.checks[0].last.observed,
            Some(50.0),
            "the last check is kept in full for the live view"
        );
    }

    #[test]
    fn only_the_last_checks_are_kept_but_all_are_counted() {
        let plan = plan(1000);
        let gates = &plan.stages()[0].gates;
        let mut stage = stage(&plan);
        for i in 0..(KEPT as i64 + 5) {
            let value = Some(i as f64);
            record(
                &mut stage,
                gates,
                vec![(1, check(Verdict::Pass, value))],
                T0 + i,
            );
        }
        let kept = &stage.checks[0];
        assert_eq!(kept.series.len(), KEPT);
        assert_eq!(kept.series[0], Check(T0 + 5, Some(5.0), Verdict::Pass));
        assert_eq!(kept.total, KEPT as u32 + 5);
    }

    #[test]
    fn checks_are_stored_as_compact_triples() {
        let json = serde_json::to_value(Check(T0, Some(2.5), Verdict::Inconclusive)).unwrap();
        assert_eq!(json, json!([T0, 2.5, "inconclusive"]));
        let watch = Watch {
            interval_seconds: 10,
            failure_limit: 1,
            on_no_data: OnNoData::Hold,
        };
        let gate = Gate::CustomPromQl {
            query: "up".into(),
            comparator: Comparator::Lt,
            threshold: 1.0,
            watch,
        };
        assert_eq!(gate.watch(), Some(watch));
    }
}
