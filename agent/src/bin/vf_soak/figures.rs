//! The soak's figures, computed from what every node recorded and the release row. Pure:
//! plain data in, plain data out, so the rules are unit-tested with made-up runs.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::api::Release;
use super::node::{Answer, NodeRun, Served};

/// When the fleet ran (ms since the epoch) and how often it polled.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
    pub interval_ms: i64,
}

/// What a node may be served from a moment on.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// While a release is in flight: the canary to the stage targets, the rest held.
    Staged {
        targets: HashSet<String>,
        canary: i64,
        rest: Served,
    },
    /// Every node the same (before the release, or after it left flight).
    All(Served),
}

impl Expect {
    fn for_node(&self, node_id: &str) -> Served {
        match self {
            Expect::Staged {
                targets,
                canary,
                rest,
            } => {
                if targets.contains(node_id) {
                    Served::Version(*canary)
                } else {
                    *rest
                }
            }
            Expect::All(served) => *served,
        }
    }
}

/// A moment the release changed what nodes may be served.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub label: String,
    pub at_ms: i64,
    pub expect: Expect,
}

/// The release's transitions, in order: each started stage (targets are cumulative), then
/// completion or rollback. `deployed_after` is the deployed version once it left flight
/// (after a rollback: the reverted config's new version).
pub fn transitions(release: &Release, deployed_after: Option<i64>) -> Vec<Transition> {
    let rest = release
        .previous_version
        .map_or(Served::Absent, Served::Version);
    let mut stages = release.stages.clone();
    stages.sort_by_key(|s| s.index);
    let mut targets = HashSet::new();
    let mut out = Vec::new();
    for stage in &stages {
        targets.extend(stage.node_ids.iter().cloned());
        out.push(Transition {
            label: format!("stage {} ({} nodes)", stage.index + 1, targets.len()),
            at_ms: stage.started_at,
            expect: Expect::Staged {
                targets: targets.clone(),
                canary: release.canary_version,
                rest,
            },
        });
    }
    let ended_at = release.completed_at.unwrap_or(release.updated_at);
    let end = match release.status.as_str() {
        "BROADENED" => Some(("complete", Some(release.canary_version))),
        "ROLLED_BACK" => Some(("rollback", deployed_after)),
        _ => None,
    };
    if let Some((label, version)) = end {
        out.push(Transition {
            label: label.to_string(),
            at_ms: ended_at,
            expect: Expect::All(version.map_or(Served::Absent, Served::Version)),
        });
    }
    out
}

/// Latency percentiles over every HTTP answer, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// How fast the fleet followed one transition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransitionFigures {
    pub label: String,
    /// Seconds after the fleet started.
    pub at_s: f64,
    /// Nodes whose allowed version this transition changed.
    pub moving: usize,
    /// Until the first answer that served the transition to a moving node (its commit came
    /// before; 0 when nothing moved).
    pub visible_after_ms: i64,
    /// Until every node was on the version its stage allows; `None`: some never were
    /// before the next transition (or the end of the run).
    pub all_on_version_ms: Option<i64>,
    /// Nodes not on it within one poll interval of the transition being visible (including
    /// `never`).
    pub late: usize,
    pub never: usize,
    /// How long the fleet was watched after it: until the next transition or the run's end.
    pub observed_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub agents: usize,
    pub requests: u64,
    /// By status: "200", "304", "429", "503" always; any other status; "none" for requests
    /// that got no HTTP answer.
    pub answers: BTreeMap<String, u64>,
    pub latency_ms: Option<Latency>,
    /// Nodes never served the soak pipeline.
    pub never_served: usize,
    /// Nodes that went more than 3 intervals without a 200/304 at some point.
    pub starved: usize,
    pub worst_gap_ms: i64,
    /// Answers serving the canary to a node before its stage opened.
    pub fencing_violations: u64,
    /// Nodes served the canary, then the previous version, while the release was in flight.
    pub backwards_steps: usize,
    /// Nodes served the pipeline, then an answer without it.
    pub vanished: usize,
    pub transitions: Vec<TransitionFigures>,
}

fn successful(answers: &[Answer]) -> impl Iterator<Item = &Answer> {
    answers.iter().filter(|a| a.served.is_some())
}

/// Computes every figure. `baseline` is what nodes are served before the first transition.
pub fn compute(
    runs: &[NodeRun],
    window: Window,
    baseline: Served,
    transitions: &[Transition],
    release: Option<&Release>,
) -> Figures {
    let mut answers: BTreeMap<String, u64> = ["200", "304", "429", "503"]
        .iter()
        .map(|s| (s.to_string(), 0))
        .collect();
    let mut latencies = Vec::new();
    for a in runs.iter().flat_map(|r| &r.answers) {
        let key = match a.status {
            0 => "none".to_string(),
            s => s.to_string(),
        };
        *answers.entry(key).or_default() += 1;
        if a.status != 0 {
            latencies.push(a.latency_us);
        }
    }
    let (starved, worst_gap_ms) = starvation(runs, window);
    let limits = release.map(canary_allowed_from).unwrap_or_default();
    Figures {
        agents: runs.len(),
        requests: runs.iter().map(|r| r.answers.len() as u64).sum(),
        answers,
        latency_ms: latency(latencies),
        never_served: runs
            .iter()
            .filter(|r| {
                !successful(&r.answers).any(|a| matches!(a.served, Some(Served::Version(_))))
            })
            .count(),
        starved,
        worst_gap_ms,
        fencing_violations: release.map_or(0, |rel| fencing_violations(runs, rel, &limits)),
        backwards_steps: release.map_or(0, |rel| backwards_steps(runs, rel)),
        vanished: runs.iter().filter(|r| vanished(&r.answers)).count(),
        transitions: transition_figures(runs, window, baseline, transitions),
    }
}

fn latency(mut us: Vec<u64>) -> Option<Latency> {
    us.sort_unstable();
    let at = |p: f64| {
        let rank = ((p * us.len() as f64).ceil() as usize).clamp(1, us.len());
        us[rank - 1] as f64 / 1000.0
    };
    let max = *us.last()?;
    Some(Latency {
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        max: max as f64 / 1000.0,
    })
}

/// Nodes with a gap longer than 3 intervals between successful answers (counting from the
/// start and to the end of the run), and the longest gap seen.
fn starvation(runs: &[NodeRun], window: Window) -> (usize, i64) {
    let mut starved = 0;
    let mut worst = 0;
    for run in runs {
        let mut last = window.start_ms;
        let mut gap = 0;
        for a in successful(&run.answers) {
            gap = gap.max(a.at_ms - last);
            last = a.at_ms;
        }
        gap = gap.max(window.end_ms - last);
        worst = worst.max(gap);
        if gap > 3 * window.interval_ms {
            starved += 1;
        }
    }
    (starved, worst)
}

/// From when each node may be served the canary: its stage's start, or the completion.
fn canary_allowed_from(release: &Release) -> HashMap<String, i64> {
    let mut from = HashMap::new();
    for stage in &release.stages {
        for id in &stage.node_ids {
            from.entry(id.clone())
                .and_modify(|t: &mut i64| *t = (*t).min(stage.started_at))
                .or_insert(stage.started_at);
        }
    }
    from
}

fn fencing_violations(runs: &[NodeRun], release: &Release, from: &HashMap<String, i64>) -> u64 {
    let completed = (release.status == "BROADENED")
        .then_some(release.completed_at)
        .flatten()
        .unwrap_or(i64::MAX);
    let mut violations = 0;
    for run in runs {
        let allowed = from
            .get(&run.node_id)
            .copied()
            .unwrap_or(i64::MAX)
            .min(completed);
        violations += successful(&run.answers)
            .filter(|a| a.served == Some(Served::Version(release.canary_version)))
            .filter(|a| a.at_ms < allowed)
            .count() as u64;
    }
    violations
}

fn backwards_steps(runs: &[NodeRun], release: &Release) -> usize {
    let Some(previous) = release.previous_version else {
        return 0;
    };
    runs.iter()
        .filter(|run| {
            let mut had_canary = false;
            successful(&run.answers).any(|a| match a.served {
                Some(Served::Version(v)) if v == release.canary_version => {
                    had_canary = true;
                    false
                }
                Some(Served::Version(v)) => had_canary && v == previous,
                _ => false,
            })
        })
        .count()
}

fn vanished(answers: &[Answer]) -> bool {
    let mut had = false;
    successful(answers).any(|a| match a.served {
        Some(Served::Version(_)) => {
            had = true;
            false
        }
        _ => had,
    })
}

/// When `node` was first on `expected` after `at` (0 if its last answer before already was),
/// or `None` if not before `until`.
fn delay(answers: &[Answer], expected: Served, at: i64, until: i64) -> Option<i64> {
    let before = successful(answers).filter(|a| a.at_ms <= at).last();
    if before.is_some_and(|a| a.served == Some(expected)) {
        return Some(0);
    }
    successful(answers)
        .find(|a| a.at_ms > at && a.at_ms <= until && a.served == Some(expected))
        .map(|a| a.at_ms - at)
}

fn transition_figures(
    runs: &[NodeRun],
    window: Window,
    baseline: Served,
    transitions: &[Transition],
) -> Vec<TransitionFigures> {
    let mut previous = Expect::All(baseline);
    let mut out = Vec::new();
    for (i, t) in transitions.iter().enumerate() {
        if t.at_ms >= window.end_ms {
            break;
        }
        let until = transitions
            .get(i + 1)
            .map_or(window.end_ms, |next| next.at_ms.min(window.end_ms));
        // Per node: whether this transition moves it, and when it was first on its version.
        let delays: Vec<(bool, Option<i64>)> = runs
            .iter()
            .map(|run| {
                let expected = t.expect.for_node(&run.node_id);
                let moving = expected != previous.for_node(&run.node_id);
                (moving, delay(&run.answers, expected, t.at_ms, until))
            })
            .collect();
        // The server records a transition's time inside its transaction, before the commit
        // (opening a stage writes its targets first): the first answer that served it to a
        // moving node bounds the commit from above.
        let visible_after_ms = delays
            .iter()
            .filter_map(|&(moving, ms)| ms.filter(|&ms| moving && ms > 0))
            .min()
            .unwrap_or(0);
        let mut figures = TransitionFigures {
            label: t.label.clone(),
            at_s: (t.at_ms - window.start_ms) as f64 / 1000.0,
            moving: delays.iter().filter(|(moving, _)| *moving).count(),
            visible_after_ms,
            all_on_version_ms: Some(0),
            late: 0,
            never: 0,
            observed_ms: until - t.at_ms,
        };
        for (_, ms) in delays {
            match ms {
                Some(ms) => {
                    figures.all_on_version_ms = figures.all_on_version_ms.map(|m| m.max(ms));
                    if ms > visible_after_ms + window.interval_ms {
                        figures.late += 1;
                    }
                }
                None => {
                    figures.all_on_version_ms = None;
                    figures.late += 1;
                    figures.never += 1;
                }
            }
        }
        out.push(figures);
        previous = t.expect.clone();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::api::Stage;
    use super::*;

    fn ok(at_ms: i64, version: i64) -> Answer {
        Answer {
            at_ms,
            latency_us: 1000,
            status: 200,
            served: Some(Served::Version(version)),
        }
    }

    fn run(id: &str, answers: Vec<Answer>) -> NodeRun {
        NodeRun {
            node_id: id.into(),
            answers,
        }
    }

    /// Stage 1 (node a) opens at 10 000 ms; in flight.
    fn release() -> Release {
        Release {
            id: "r".into(),
            canary_version: 2,
            previous_version: Some(1),
            status: "CANARY_DEPLOYED".into(),
            current_stage: 0,
            stage_count: 2,
            stages: vec![Stage {
                index: 0,
                node_ids: vec!["a".into()],
                started_at: 10_000,
            }],
            created_at: 10_000,
            updated_at: 10_000,
            completed_at: None,
            row_version: 1,
        }
    }

    const WINDOW: Window = Window {
        start_ms: 0,
        end_ms: 30_000,
        interval_ms: 5_000,
    };

    fn figures(runs: &[NodeRun]) -> Figures {
        let r = release();
        compute(
            runs,
            WINDOW,
            Served::Version(1),
            &transitions(&r, None),
            Some(&r),
        )
    }

    #[test]
    fn a_stage_converges_when_its_nodes_are_first_served_the_canary() {
        let runs = [
            run("a", vec![ok(5_000, 1), ok(12_000, 2), ok(17_000, 2)]),
            run("b", vec![ok(6_000, 1), ok(11_000, 1), ok(16_000, 1)]),
        ];
        let f = figures(&runs);
        let stage = &f.transitions[0];
        assert_eq!(stage.moving, 1);
        assert_eq!(stage.all_on_version_ms, Some(2_000));
        assert_eq!((stage.late, stage.never), (0, 0));
        assert_eq!(f.fencing_violations, 0);
    }

    #[test]
    fn a_node_kept_on_the_previous_version_past_one_interval_is_late() {
        let mut r = release();
        r.stages[0].node_ids = vec!["a".into(), "b".into()];
        let runs = [
            run("a", vec![ok(11_000, 1), ok(16_000, 1), ok(21_000, 2)]),
            // b shows the stage was visible 1 s after its recorded start.
            run("b", vec![ok(11_000, 2)]),
        ];
        let f = compute(
            &runs,
            WINDOW,
            Served::Version(1),
            &transitions(&r, None),
            Some(&r),
        );
        let stage = &f.transitions[0];
        assert_eq!(stage.visible_after_ms, 1_000);
        assert_eq!(stage.all_on_version_ms, Some(11_000));
        assert_eq!(stage.late, 1);
    }

    /// The transition's recorded time comes before its commit: a node that polled in
    /// between got the previous version, rightly, and is back one interval later.
    #[test]
    fn one_interval_counts_from_the_first_answer_that_served_the_transition() {
        let stage_one = |c_second: i64| {
            let mut r = release();
            r.stages[0].node_ids = vec!["a".into(), "b".into(), "c".into()];
            let runs = [
                run("a", vec![ok(10_080, 2)]),
                run("b", vec![ok(10_050, 1), ok(15_060, 2)]),
                run("c", vec![ok(10_100, 1), ok(c_second, 2)]),
            ];
            compute(
                &runs,
                WINDOW,
                Served::Version(1),
                &transitions(&r, None),
                Some(&r),
            )
            .transitions[0]
                .clone()
        };
        let on_time = stage_one(15_080);
        assert_eq!(on_time.visible_after_ms, 80);
        assert_eq!(on_time.all_on_version_ms, Some(5_080));
        assert_eq!((on_time.moving, on_time.late), (3, 0));
        assert_eq!(
            stage_one(15_081).late,
            1,
            "c: one interval and 1 ms after visible"
        );
    }

    #[test]
    fn the_canary_served_before_a_nodes_stage_is_a_fencing_violation() {
        let runs = [run("b", vec![ok(11_000, 2)]), run("a", vec![ok(9_000, 2)])];
        assert_eq!(figures(&runs).fencing_violations, 2);
    }

    #[test]
    fn the_previous_version_after_the_canary_is_a_backwards_step() {
        let runs = [run("a", vec![ok(11_000, 2), ok(16_000, 1)])];
        assert_eq!(figures(&runs).backwards_steps, 1);
    }

    #[test]
    fn an_answer_without_the_pipeline_after_it_was_served_is_a_vanished_pipeline() {
        let mut absent = ok(8_000, 1);
        absent.served = Some(Served::Absent);
        let runs = [run("b", vec![ok(3_000, 1), absent])];
        assert_eq!(figures(&runs).vanished, 1);
    }

    #[test]
    fn a_node_silent_for_more_than_three_intervals_is_starved() {
        let runs = [
            run("a", vec![ok(4_000, 1), ok(25_000, 1), ok(29_000, 1)]),
            run("b", (1..=6).map(|i| ok(i * 5_000 - 100, 1)).collect()),
        ];
        let f = figures(&runs);
        assert_eq!(f.starved, 1);
        assert_eq!(f.worst_gap_ms, 21_000);
    }
}
