//! The deploy dialog: direct deploy, plan-less canary, or a progressive rollout plan.

use leptos::prelude::*;

use crate::api::error_text;
use crate::api::pipelines::DeployPipeline;
use crate::components::ErrorBox;
use crate::types::PipelineDetail;

/// The direct-deploy form, prefilled with the deployed config once it is known.
#[component]
pub fn DeployForm(
    id: Memo<String>,
    deploy: ServerAction<DeployPipeline>,
    detail: Resource<Result<PipelineDetail, ServerFnError>>,
) -> impl IntoView {
    let config = RwSignal::new(String::new());
    let changelog = RwSignal::new(String::new());
    let touched = RwSignal::new(false);
    Effect::new(move |_| {
        if touched.get_untracked() {
            return;
        }
        if let Some(Ok(d)) = detail.get() {
            if let Some(c) = d.deployed_config {
                config.set(c);
            }
        }
    });
    let empty = Memo::new(move |_| config.get().trim().is_empty());
    let line_numbers = move || {
        let n = config.get().lines().count().max(1);
        (1..=n)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    view! {
        <form class="card form" aria-label="Deploy" on:submit=move |ev| {
            ev.prevent_default();
            deploy.dispatch(DeployPipeline {
                pipeline_id: id.get_untracked(),
                config_yaml: config.get_untracked(),
                changelog: changelog.get_untracked(),
            });
            touched.set(false);
        }>
            <h2>"Deploy"</h2>
            <p class="muted">"Publishes the config as a new version and deploys it to every node the selector admits."</p>
            <label for="config">"Config (YAML)"</label>
            <div class="editor">
                <pre class="gutter" aria-hidden="true">{line_numbers}</pre>
                <textarea id="config" name="config" rows="14" spellcheck="false"
                    prop:value=move || config.get()
                    on:input=move |ev| { touched.set(true); config.set(event_target_value(&ev)); }
                    aria-invalid=move || empty.get().to_string()></textarea>
            </div>
            {move || (empty.get() && touched.get()).then(|| view! { <p class="field-error">"configYaml: must not be empty"</p> })}
            <label>"Changelog" <input name="changelog" bind:value=changelog placeholder="What changed and why"/></label>
            <button type="submit" class="primary" disabled=move || empty.get() || deploy.pending().get()>"Deploy now"</button>
            {move || deploy.value().get().map(|r| match r {
                Ok(v) => view! { <p class="ok" role="status">{format!("Deployed v{}", v.version)}</p> }.into_any(),
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
            })}
        </form>
    }
}
