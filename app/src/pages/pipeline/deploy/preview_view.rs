//! How a stage preview and the fleet summary read. Fixed-height boxes, so the form does not
//! jump while the fleet and the release id arrive.

use leptos::prelude::*;

use super::preview::{DeployContext, StagePreview};

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
            targeted,
            fleet,
        }) => {
            let head = if names.is_empty() {
                "Adds no nodes".to_owned()
            } else {
                format!("Adds {}", nodes(names.len()))
            };
            view! {
                <p>
                    <strong class="preview-count">{head}</strong>
                    <span class="muted">{format!(" - {targeted} of {} targeted once it opens", nodes(fleet))}</span>
                </p>
                <ul class="chips preview-nodes" aria-label="Nodes this adds">
                    {names.into_iter().map(|n| view! { <li class="chip">{n}</li> }).collect_view()}
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
pub fn FleetSummary(context: RwSignal<Option<DeployContext>>) -> impl IntoView {
    let body = move || {
        context.with(|c| match c {
            None => view! { <p class="muted">"Loading the fleet..."</p> }.into_any(),
            Some(c) => {
                let admitted = c.nodes.iter().filter(|n| n.admitted).count();
                let excluded = c.excluded_names();
                let excluded_text = if excluded.is_empty() {
                    "The pipeline's node selector admits every node of the environment.".to_owned()
                } else {
                    format!(
                        "Excluded by the pipeline's node selector, never targeted ({}): {}",
                        excluded.len(),
                        excluded.join(", ")
                    )
                };
                view! {
                    <p>{format!("Fleet: {} admitted by the pipeline's node selector.", nodes(admitted))}</p>
                    <p class="muted" data-testid="excluded-nodes">{excluded_text}</p>
                }
                .into_any()
            }
        })
    };
    view! { <div class="fleet-summary" data-testid="fleet-summary">{body}</div> }
}
