//! A stage's chart: error rate and events/s of its canary nodes, minute by minute, as two
//! panels with a value axis, the times of the first and last minute (UTC) and, on the error
//! panel, the stage's error-rate limit. The rollout card and the release history draw it.

use leptos::prelude::*;

/// Plot area of a panel inside its `W` x `H` viewBox: room on the left for the value axis
/// and at the bottom for the times.
const W: f64 = 480.0;
const H: f64 = 110.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = W - 10.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = H - 20.0;

/// The smallest of 1, 2, 5 times a power of ten at or above `max`: the top of the value axis.
pub fn nice_top(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|top| *top >= max * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

/// An axis value without trailing zeros: `0`, `2.5`, `0.05`, `1000`.
pub fn tick_text(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `HH:MM` (UTC) of a unix time in milliseconds.
pub fn clock(ms: i64) -> String {
    let minute = ms.div_euclid(60_000).rem_euclid(24 * 60);
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

/// Per minute `(start, events in, errors)`: the error rate in percent and the events per second.
pub fn rates(points: &[(i64, i64, i64)]) -> (Vec<f64>, Vec<f64>) {
    points
        .iter()
        .map(|&(_, events, errors)| {
            let rate = if events > 0 {
                errors as f64 * 100.0 / events as f64
            } else {
                0.0
            };
            (rate, events as f64 / 60.0)
        })
        .unzip()
}

/// Where each of `n` points sits across the plot area; a single point sits in the middle.
pub fn x_positions(n: usize) -> Vec<f64> {
    match n {
        0 => Vec::new(),
        1 => vec![(LEFT + RIGHT) / 2.0],
        _ => (0..n)
            .map(|i| LEFT + i as f64 * (RIGHT - LEFT) / (n - 1) as f64)
            .collect(),
    }
}

/// The time labels under the panels: the first minute, the last, and the middle one when
/// there are three or more.
pub fn time_ticks(minutes: &[i64]) -> Vec<(f64, String)> {
    let xs = x_positions(minutes.len());
    let mut picks = vec![0, minutes.len().saturating_sub(1)];
    if minutes.len() >= 3 {
        picks.insert(1, minutes.len() / 2);
    }
    picks.dedup();
    picks
        .into_iter()
        .filter(|&i| i < minutes.len())
        .map(|i| (xs[i], clock(minutes[i])))
        .collect()
}

/// The stage's error-rate limit in percent, when its gates have one.
pub fn error_limit(plan: Option<&vf_rules::RolloutPlan>, index: usize) -> Option<f64> {
    plan?.stage(index)?.gates.iter().find_map(|g| match g {
        vf_rules::Gate::ErrorRate { max_percent, .. } => Some(*max_percent),
        _ => None,
    })
}

fn y_of(v: f64, top: f64) -> f64 {
    BOTTOM - (v / top).clamp(0.0, 1.0) * (BOTTOM - TOP)
}

/// One panel: title, value axis 0 / half / top, the line, an optional limit line, the times.
#[component]
fn Panel(
    title: &'static str,
    class: &'static str,
    values: Vec<f64>,
    ticks: Vec<(f64, String)>,
    limit: Option<f64>,
) -> impl IntoView {
    let max = values.iter().copied().chain(limit).fold(0.0f64, f64::max);
    let top = nice_top(max);
    let xs = x_positions(values.len());
    let points: Vec<(f64, f64)> = xs
        .iter()
        .zip(&values)
        .map(|(x, v)| (*x, y_of(*v, top)))
        .collect();
    let line = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ");
    let unit = if class == "line-errors" { "%" } else { "" };
    view! {
        <svg viewBox=format!("0 0 {W} {H}") class="panel" aria-hidden="true">
            <text class="title" x=LEFT y="12">{title}</text>
            {[0.0, top / 2.0, top].into_iter().map(|v| {
                let y = y_of(v, top);
                view! {
                    <line class="grid" x1=LEFT x2=RIGHT y1=y y2=y/>
                    <text class="tick" x=LEFT - 4.0 y=y + 3.0 text-anchor="end">{tick_text(v)}</text>
                }
            }).collect_view()}
            {limit.map(|l| {
                let y = y_of(l, top);
                view! {
                    <line class="limit" x1=LEFT x2=RIGHT y1=y y2=y/>
                    <text class="limit-label" x=RIGHT y=y - 3.0 text-anchor="end">{format!("max {}{unit}", tick_text(l))}</text>
                }
            })}
            <polyline class=class fill="none" points=line/>
            // A dot per minute: a single minute shows too.
            {points.into_iter().map(|(x, y)| view! { <circle class=class cx=x cy=y r="2.5"/> }).collect_view()}
            {ticks.into_iter().map(|(x, label)| view! {
                <text class="time" x=x y=H - 6.0 text-anchor="middle">{label}</text>
            }).collect_view()}
        </svg>
    }
}

/// A stage's error rate and events/s over its bake; `points` are per minute
/// `(start in unix ms, events in, errors)`, `max_error_percent` the stage's limit.
#[component]
pub fn StageChart(points: Vec<(i64, i64, i64)>, max_error_percent: Option<f64>) -> impl IntoView {
    if points.is_empty() {
        return view! { <p class="muted small">"No metrics from canary nodes during this stage yet."</p> }.into_any();
    }
    let (errors, throughput) = rates(&points);
    let minutes: Vec<i64> = points.iter().map(|p| p.0).collect();
    let ticks = time_ticks(&minutes);
    let peak = |v: &[f64]| v.iter().copied().fold(0.0f64, f64::max);
    let label = format!(
        "Error rate up to {}% and throughput up to {} events/s over {}, {} to {} UTC",
        tick_text(peak(&errors)),
        tick_text(peak(&throughput)),
        crate::types::plural(points.len() as i64, "minute"),
        clock(minutes[0]),
        clock(minutes[minutes.len() - 1] + 60_000),
    );
    view! {
        <figure class="chart" role="img" aria-label=label data-testid="stage-chart">
            <Panel title="Error rate (%)" class="line-errors" values=errors ticks=ticks.clone() limit=max_error_percent/>
            <Panel title="Events/s" class="line-throughput" values=throughput ticks limit=None/>
        </figure>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_tops_out_at_a_round_number_at_or_above_the_peak() {
        assert_eq!(nice_top(0.0), 1.0);
        assert_eq!(nice_top(0.3), 0.5);
        assert_eq!(nice_top(5.0), 5.0);
        assert_eq!(nice_top(5.1), 10.0);
        assert_eq!(nice_top(140.0), 200.0);
        assert_eq!(nice_top(f64::NAN), 1.0);
    }

    #[test]
    fn axis_values_drop_trailing_zeros() {
        assert_eq!(tick_text(0.0), "0");
        assert_eq!(tick_text(2.5), "2.5");
        assert_eq!(tick_text(0.05), "0.05");
        assert_eq!(tick_text(1000.0), "1000");
    }

    #[test]
    fn times_are_utc_hours_and_minutes() {
        assert_eq!(clock(0), "00:00");
        let midnight = 20_428 * 86_400_000; // 2025-12-06 00:00 UTC
        assert_eq!(clock(midnight + (14 * 60 + 5) * 60_000 + 30_000), "14:05");
        assert_eq!(clock(-60_000), "23:59");
    }

    #[test]
    fn rates_are_percent_of_events_and_events_per_second() {
        let (errors, throughput) = rates(&[(0, 600, 30), (60_000, 0, 0)]);
        assert_eq!(errors, vec![5.0, 0.0]);
        assert_eq!(throughput, vec![10.0, 0.0]);
    }

    #[test]
    fn time_labels_mark_the_first_middle_and_last_minute() {
        assert_eq!(time_ticks(&[]), vec![]);
        let one = time_ticks(&[0]);
        assert_eq!(one, vec![((LEFT + RIGHT) / 2.0, "00:00".to_string())]);
        let labels: Vec<String> = time_ticks(&[0, 60_000, 120_000, 180_000])
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(labels, ["00:00", "00:02", "00:03"]);
    }

    #[test]
    fn the_limit_line_is_the_stages_error_rate_gate() {
        let plan = vf_rules::RolloutPlan::parse(&serde_json::json!({"stages": [
            {"selector": {"percentage": 10}, "bakeSeconds": 60, "gates": [{"errorRate": {"maxPercent": 5}}]},
            {"selector": {"percentage": 100}, "bakeSeconds": 60, "gates": [{"healthWindow": null}]}
        ]}))
        .unwrap();
        assert_eq!(error_limit(Some(&plan), 0), Some(5.0));
        assert_eq!(error_limit(Some(&plan), 1), None);
        assert_eq!(error_limit(None, 0), None);
    }
}
