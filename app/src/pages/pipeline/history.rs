//! Release history: every release of the pipeline with its plan, outcome, who acted, each
//! stage's gate results, and a chart per stage of error rate and throughput over the bake.

use leptos::prelude::*;

use super::rollout::{selector_text, stage_state, GateEvaluations};
use crate::api::releases::release_history;
use crate::components::{Loaded, StatusBadge};
use crate::types::{format_time, ReleaseView, StageSeries};

#[component]
pub fn History(id: Memo<String>, refresh: Signal<(u64, usize, usize)>) -> impl IntoView {
    let releases = Resource::new(
        move || (id.get(), refresh.get()),
        |(id, _)| release_history(id),
    );
    view! {
        <section aria-label="Release history">
            <h2>"Release history"</h2>
            <Loaded resource=releases let:list>
                {if list.is_empty() {
                    view! { <p class="empty">"No releases yet."</p> }.into_any()
                } else {
                    view! {
                        <ol class="history" data-testid="release-history">
                            {list.into_iter().map(|item| view! { <HistoryItem r=item.release series=item.series/> }).collect_view()}
                        </ol>
                    }.into_any()
                }}
            </Loaded>
        </section>
    }
}

#[component]
fn HistoryItem(r: ReleaseView, series: Vec<StageSeries>) -> impl IntoView {
    let summary = format!(
        "v{} {} - {} - created {} by {}, last action by {}",
        r.canary_version,
        if r.planless {
            "canary"
        } else {
            "progressive rollout"
        },
        crate::types::plural(r.stage_count, "stage"),
        format_time(r.created_at),
        r.created_by,
        r.updated_by
    );
    view! {
        <li class="card history-item" data-release=r.id.clone() data-status=r.status.map(|s| s.as_str())>
            <details>
                <summary>
                    {r.status.map(|s| view! { <StatusBadge status=s/> })}" " {summary}
                </summary>
                {r.unreadable.clone().map(|u| view! { <p class="failure">{u}</p> })}
                {r.failure_reason.clone().map(|f| view! { <p class="failure">{f}</p> })}
                <super::rollout::Notes notes=r.notes.clone()/>
                <pre class="mono small plan">{r.plan.as_ref().map(|p| serde_json::to_string_pretty(&p.to_json()).unwrap_or_default())}</pre>
                <ol class="stages">
                    {(0..r.stage_count as usize).map(|i| {
                        let stage = r.stages.get(i).cloned();
                        let state = stage_state(&r, i);
                        view! {
                            <li class="stage">
                                <div class="stage-head">
                                    <strong>{format!("Stage {}", i + 1)}</strong>
                                    <StatusBadge status=state.badge()/>
                                    <span class="muted">{selector_text(r.plan.as_ref(), i)}</span>
                                </div>
                                {stage.map(|s| view! {
                                    <StageChart series=series.iter().find(|x| x.index == i as i64).cloned()/>
                                    <GateEvaluations evaluations=s.evaluations.clone()/>
                                })}
                            </li>
                        }
                    }).collect_view()}
                </ol>
            </details>
        </li>
    }
}

/// Scales points into an SVG polyline over `width` x `height` (y grows downwards).
pub fn polyline(values: &[f64], width: f64, height: f64) -> String {
    let max = values.iter().cloned().fold(0.0f64, f64::max);
    let n = values.len();
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let x = if n <= 1 {
                width / 2.0
            } else {
                i as f64 * width / (n - 1) as f64
            };
            let y = if max <= 0.0 {
                height
            } else {
                height - v / max * height
            };
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[component]
fn StageChart(series: Option<StageSeries>) -> impl IntoView {
    let points = series.map(|s| s.points).unwrap_or_default();
    if points.is_empty() {
        return view! { <p class="muted small">"No metrics from canary nodes during this stage."</p> }.into_any();
    }
    let throughput: Vec<f64> = points.iter().map(|(_, e, _)| *e as f64 / 60.0).collect();
    let error_rate: Vec<f64> = points
        .iter()
        .map(|(_, e, err)| {
            if *e > 0 {
                *err as f64 * 100.0 / *e as f64
            } else {
                0.0
            }
        })
        .collect();
    let max_tp = throughput.iter().cloned().fold(0.0, f64::max);
    let max_er = error_rate.iter().cloned().fold(0.0, f64::max);
    let (w, h) = (480.0, 80.0);
    view! {
        <figure class="chart">
            <svg viewBox="0 0 480 80" width="480" height="80" role="img"
                aria-label=format!("Throughput up to {max_tp:.1} events/s and error rate up to {max_er:.2}% over {}", crate::types::plural(points.len() as i64, "minute"))>
                <polyline class="line-throughput" fill="none" points=polyline(&throughput, w, h)/>
                <polyline class="line-errors" fill="none" points=polyline(&error_rate, w, h)/>
            </svg>
            <figcaption class="small">
                <span class="key key-throughput">"throughput (max " {format!("{max_tp:.1}")} " events/s)"</span>
                " "
                <span class="key key-errors">"error rate (max " {format!("{max_er:.2}")} " %)"</span>
            </figcaption>
        </figure>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polylines_scale_the_largest_value_to_the_top() {
        assert_eq!(
            polyline(&[0.0, 5.0, 10.0], 100.0, 50.0),
            "0.0,50.0 50.0,25.0 100.0,0.0"
        );
        assert_eq!(polyline(&[3.0], 100.0, 50.0), "50.0,0.0");
        assert_eq!(polyline(&[0.0, 0.0], 100.0, 50.0), "0.0,50.0 100.0,50.0");
    }
}
