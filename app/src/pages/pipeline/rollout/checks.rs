//! What a baking stage's signal gates show between evaluations: each gate's last check (its
//! value beside the threshold, its verdict, the failing checks in a row against the limit)
//! and a small series of its recent checks; and the operator actions a gate refused, kept
//! apart from the evidence in a collapsed list. The page refreshes every two seconds, so
//! both update without a reload.

use leptos::prelude::*;
use vf_rules::{Check, Comparator, Gate, GateChecks, RefusedAttempt, Verdict};

use crate::components::StatusBadge;
use crate::types::format_time;

/// `2.50%`, `0.0312`, `12`: a gate's value the way its threshold is written.
pub fn value_text(gate: &Gate, value: f64) -> String {
    value_text_of(gate.kind(), value)
}

/// [`value_text`] by the gate's name as results carry it (`errorRate`, `applied`, ...): the
/// percent gates as `0.20%`, others as plain numbers.
pub fn value_text_of(gate: &str, value: f64) -> String {
    match gate {
        "errorRate" | "throughputDrop" | "applied" => format!("{value:.2}%"),
        _ if value.fract() == 0.0 && value.abs() < 1e15 => format!("{value:.0}"),
        _ => format!("{value:.4}"),
    }
}

/// What the value is compared with: `max 5%`, `max drop 20%`, `< 0.01`.
pub fn limit_text(gate: &Gate) -> String {
    match gate {
        Gate::HealthWindow => String::new(),
        Gate::ErrorRate { max_percent, .. } => format!("max {max_percent}%"),
        Gate::ThroughputDrop {
            max_drop_percent, ..
        } => format!("max drop {max_drop_percent}%"),
        Gate::CustomPromQl {
            comparator,
            threshold,
            ..
        } => {
            let op = match comparator {
                Comparator::Lt => "<",
                Comparator::Lte => "<=",
                Comparator::Gt => ">",
                Comparator::Gte => ">=",
            };
            format!("{op} {threshold}")
        }
    }
}

/// The badge text of a verdict: `PASS`, `INCONCLUSIVE`, ...
pub fn verdict_badge(verdict: Verdict) -> String {
    verdict.as_str().to_uppercase()
}

/// The vertical frame of a sparkline: the range of the checks' values and the threshold,
/// so the threshold line is always inside it. `None` when nothing has a value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    lo: f64,
    span: f64,
    height: f64,
}

impl Frame {
    pub fn of(series: &[Check], threshold: Option<f64>, height: f64) -> Option<Frame> {
        let values = series.iter().filter_map(|c| c.1).chain(threshold);
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        lo.is_finite().then_some(Frame {
            lo,
            span: if hi > lo { hi - lo } else { 1.0 },
            height,
        })
    }

    /// The y of `value`, downwards from the top.
    pub fn y(self, value: f64) -> f64 {
        self.height - (value - self.lo) / self.span * self.height
    }
}

/// The points `(x, y, verdict)` of the checks that have a value, spread over `width`.
pub fn spark_points(series: &[Check], frame: Frame, width: f64) -> Vec<(f64, f64, Verdict)> {
    let step = if series.len() > 1 {
        width / (series.len() - 1) as f64
    } else {
        0.0
    };
    (series.iter().enumerate())
        .filter_map(|(i, c)| Some((i as f64 * step, frame.y(c.1?), c.2)))
        .collect()
}

const SPARK_W: f64 = 120.0;
const SPARK_H: f64 = 24.0;

#[component]
fn Sparkline(series: Vec<Check>, threshold: Option<f64>) -> impl IntoView {
    let Some(frame) = Frame::of(&series, threshold, SPARK_H) else {
        return ().into_any();
    };
    let points = spark_points(&series, frame, SPARK_W);
    let line: Vec<String> = points
        .iter()
        .map(|(x, y, _)| format!("{x:.1},{y:.1}"))
        .collect();
    let limit = threshold.map(|t| format!("{:.1}", frame.y(t)));
    view! {
        <svg class="sparkline" viewBox=format!("-3 -3 {} {}", SPARK_W + 6.0, SPARK_H + 6.0)
            width="126" height="30" role="img" aria-label="recent checks">
            {limit.map(|y| view! {
                <line class="limit" x1="0" x2=SPARK_W.to_string() y1=y.clone() y2=y/>
            })}
            <polyline class="values" points=line.join(" ")/>
            {points.into_iter().map(|(x, y, verdict)| view! {
                <circle cx=format!("{x:.1}") cy=format!("{y:.1}") r="2" data-verdict=verdict.as_str()/>
            }).collect_view()}
        </svg>
    }
    .into_any()
}

/// The live checks of a stage's signal gates.
#[component]
pub fn LiveChecks(gates: Vec<Gate>, checks: Vec<GateChecks>, baking: bool) -> impl IntoView {
    let watched: Vec<(usize, Gate)> = (gates.into_iter().enumerate())
        .filter(|(_, g)| g.watch().is_some())
        .collect();
    if watched.is_empty() {
        return ().into_any();
    }
    view! {
        <table class="grid compact live-checks" data-testid="live-checks">
            <caption class="small muted">{if baking { "Checks during the bake" } else { "Checks" }}</caption>
            <thead><tr>
                <th scope="col">"Gate"</th><th scope="col">"Last check"</th><th scope="col">"Value"</th>
                <th scope="col">"Limit"</th><th scope="col">"Recent"</th><th scope="col">"Evidence"</th>
            </tr></thead>
            <tbody>
                {watched.into_iter().map(|(index, gate)| {
                    let kept = checks.iter().find(|c| c.index == index).cloned();
                    let watch = gate.watch().unwrap_or_default();
                    let total = kept.as_ref().map_or(0, |k| k.total);
                    let value = kept.as_ref().and_then(|k| k.last.observed)
                        .map(|v| value_text(&gate, v))
                        .unwrap_or_else(|| "-".into());
                    let verdict = kept.as_ref().map(|k| verdict_badge(k.last.verdict));
                    let verdict_attr = verdict.clone().unwrap_or_default();
                    let streak = kept.as_ref().map_or(0, |k| k.failing_streak);
                    let every = format!("every {}s", watch.interval_seconds);
                    view! {
                        <tr data-gate=gate.kind() data-checks=total.to_string()
                            data-verdict=verdict_attr>
                            <th scope="row">{gate.kind()}<div class="muted small">{every}</div></th>
                            <td>{match (&kept, verdict) {
                                (Some(k), Some(v)) => view! {
                                    <StatusBadge status=v/>
                                    <div class="muted small">{format!("{} - {} checks", format_time(k.last_at().unwrap_or_default()), k.total)}</div>
                                }.into_any(),
                                _ => view! { <span class="muted">"no check yet"</span> }.into_any(),
                            }}</td>
                            <td class="num live-value" data-testid="live-value">{value}</td>
                            <td class="num">{limit_text(&gate)}
                                {(watch.failure_limit > 1).then(|| view! {
                                    <div class="muted small">{format!("{streak} of {} failing in a row", watch.failure_limit)}</div>
                                })}
                            </td>
                            <td>{kept.as_ref().map(|k| view! { <Sparkline series=k.series.clone() threshold=gate.threshold()/> })}</td>
                            <td class="small">{kept.map(|k| k.last.reason)}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// Operator actions a gate refused, collapsed: they are not evidence about the canary.
#[component]
pub fn RefusedAttempts(attempts: Vec<RefusedAttempt>) -> impl IntoView {
    if attempts.is_empty() {
        return ().into_any();
    }
    let summary = match attempts.len() {
        1 => "1 refused operator action".to_string(),
        n => format!("{n} refused operator actions"),
    };
    view! {
        <details class="refused small" data-testid="refused-attempts">
            <summary>{summary}</summary>
            <ul>
                {attempts.into_iter().map(|a| view! {
                    <li>
                        {format!("{} by {} at {}", a.action.as_str(), a.actor, format_time(a.at))}
                        {a.gate.map(|g| format!(" ({g})"))}
                        ": " {a.reason}
                    </li>
                }).collect_view()}
            </ul>
        </details>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use vf_rules::{Scope, Watch};

    fn error_rate() -> Gate {
        Gate::ErrorRate {
            max_percent: 5.0,
            scope: Scope::Cumulative,
            watch: Watch::default(),
        }
    }

    #[test]
    fn values_and_limits_read_the_way_the_plan_writes_them() {
        assert_eq!(value_text(&error_rate(), 2.5), "2.50%");
        assert_eq!(limit_text(&error_rate()), "max 5%");
        let promql = Gate::CustomPromQl {
            query: "up".into(),
            comparator: Comparator::Lte,
            threshold: 0.01,
            watch: Watch::default(),
        };
        assert_eq!(limit_text(&promql), "<= 0.01");
        assert_eq!(value_text(&promql, 3.0), "3");
        assert_eq!(value_text(&promql, 0.03125), "0.0312");
        // An evaluation's observed value reads like its threshold.
        assert_eq!(value_text_of("errorRate", 0.2), "0.20%");
        assert_eq!(value_text_of("errorRate", 5.0), "5.00%");
        assert_eq!(value_text_of("applied", 100.0), "100.00%");
        assert_eq!(value_text_of("canaryCrash", 0.0), "0");
        assert_eq!(verdict_badge(Verdict::Inconclusive), "INCONCLUSIVE");
    }

    #[test]
    fn the_sparkline_frames_the_values_and_the_threshold_and_skips_checks_without_one() {
        let series = [
            Check(1, Some(0.0), Verdict::Pass),
            Check(2, None, Verdict::Inconclusive),
            Check(3, Some(10.0), Verdict::Fail),
        ];
        let frame = Frame::of(&series, Some(5.0), 24.0).expect("values");
        assert_eq!(
            spark_points(&series, frame, 120.0),
            [(0.0, 24.0, Verdict::Pass), (120.0, 0.0, Verdict::Fail)]
        );
        assert_eq!(
            frame.y(5.0),
            12.0,
            "the threshold line sits inside the frame"
        );
        assert_eq!(
            Frame::of(&[Check(1, None, Verdict::Error)], None, 24.0),
            None
        );
    }
}
