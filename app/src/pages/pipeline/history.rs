//! Release history: every release of the pipeline with its plan, outcome, who acted, each
//! stage's gate results, and a chart per stage of error rate and throughput over the bake.

use crate::components::load;
use leptos::prelude::*;

use super::chart::{error_limit, StageChart};
use super::rollout::{selector_text, stage_state, GateEvaluations};
use crate::api::releases::release_history;
use crate::components::{Loaded, StatusBadge};
use crate::types::{format_time, ReleaseView, StageSeries};

#[component]
pub fn History(id: Memo<String>, refresh: Signal<(u64, usize, usize)>) -> impl IntoView {
    let releases = load(
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
                                    <StageChart
                                        points=series.iter().find(|x| x.index == i as i64).map(|x| x.points.clone()).unwrap_or_default()
                                        max_error_percent=error_limit(r.plan.as_ref(), i)/>
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
