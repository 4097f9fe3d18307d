//! How a stage preview and the fleet summary read. Fixed-height boxes, so the form does not
//! jump while the fleet and the release id arrive.

use leptos::prelude::*;

use super::Preview;
use crate::preview::StagePreview;

fn nodes(n: usize) -> String {
    if n == 1 {
        "1 node".into()
    } else {
        format!("{n} nodes")
    }
}

#[component]
pub fn StagePreviewLine(
    preview: Signal<Option<StagePreview>>,
    #[prop(into)] testid: Signal<String>,
) -> impl IntoView {
    let body = move || match preview.get() {
        None => view! { <p class="muted">"Working out which nodes this adds..."</p> }.into_any(),
        Some(StagePreview::Adds {
            names,
            adds,
            targeted,
            fleet,
        }) => {
            let head = if adds == 0 {
                "Adds no nodes".to_owned()
            } else {
                format!("Adds {}", nodes(adds))
            };
            let more = (adds > names.len()).then(|| format!("and {} more", adds - names.len()));
            view! {
                <p>
                    <strong class="preview-count">{head}</strong>
                    <span class="muted">{format!(" - {targeted} of {} targeted once it opens", nodes(fleet))}</span>
                </p>
                <ul class="chips preview-nodes" aria-label="Nodes this adds">
                    {names.into_iter().map(|n| view! { <li class="chip">{n}</li> }).collect_view()}
                    {more.map(|m| view! { <li class="chip muted">{m}</li> })}
                </ul>
            }
            .into_any()
        }
        Some(StagePreview::FixSelector) => {
            view! { <p class="muted">"Fix the selector to see which nodes this adds."</p> }
                .into_any()
        }
        Some(StagePreview::WaitsFor(stage)) => view! {
            <p class="muted">{format!("Waiting for stage {}'s selector.", stage + 1)}</p>
        }
        .into_any(),
        Some(StagePreview::Failed(message)) => {
            view! { <p class="field-error">{message}</p> }.into_any()
        }
    };
    view! { <div class="stage-preview" data-testid=testid>{body}</div> }
}

/// The release's fleet at a glance, and the nodes the pipeline's nodeSelector keeps out.
#[component]
pub fn FleetSummary(preview: RwSignal<Preview>) -> impl IntoView {
    let body = move || {
        preview.with(|p| match p {
            None => view! { <p class="muted">"Loading the fleet..."</p> }.into_any(),
            Some(Err(message)) => view! { <p class="field-error">{format!("No preview: {message}")}</p> }.into_any(),
            Some(Ok(p)) => {
                let excluded_text = if p.excluded == 0 {
                    "The pipeline's node selector admits every node of the environment.".to_owned()
                } else {
                    let more = if p.excluded > p.excluded_sample.len() { ", ..." } else { "" };
                    format!(
                        "Excluded by the pipeline's node selector, never targeted ({}): {}{more}",
                        p.excluded,
                        p.excluded_sample.join(", ")
                    )
                };
                view! {
                    <p>{format!("Fleet: {} admitted by the pipeline's node selector.", nodes(p.admitted))}</p>
                    <p class="muted" data-testid="excluded-nodes">{excluded_text}</p>
                }
                .into_any()
            }
        })
    };
    view! { <div class="fleet-summary" data-testid="fleet-summary">{body}</div> }
}
