//! The pipelines of an environment, and a form to create one.

use crate::components::load;
use leptos::prelude::*;

use crate::api::error_text;
use crate::api::pipelines::{list_pipelines, CreatePipeline};
use crate::components::{
    current_env, use_env_name, use_session, ErrorBox, LabelChips, Loaded, Table,
};
use crate::types::{format_time, parse_label_text};

#[component]
pub fn PipelinesPage() -> impl IntoView {
    let env_name = use_env_name();
    let session = use_session();
    let create = ServerAction::<CreatePipeline>::new();
    let list = load(
        move || (env_name.get(), create.version().get()),
        move |(name, _)| async move {
            let Some(env) = current_env(name).await? else {
                return Ok(None);
            };
            let pipelines = list_pipelines(env.id.clone()).await?;
            let editor = session.roles().await.can("editor", &env.id);
            Ok(Some((env, pipelines, editor)))
        },
    );
    let name = RwSignal::new(String::new());
    let selector = RwSignal::new(String::new());
    let selector_error = Memo::new(move |_| parse_label_text(&selector.get()).err());
    view! {
        <h1>"Pipelines"</h1>
        <Loaded resource=list let:loaded>
            {match loaded {
                None => view! { <p class="empty">"No environment yet."</p> }.into_any(),
                Some((env, pipelines, editor)) => {
                    let env_id = env.id.clone();
                    view! {
                        <Table rows=pipelines testid="pipelines-table"
                            columns=&["Pipeline", "Deployed", "Node selector", "Updated"]
                            empty="No pipelines yet." let:p>
                            <tr>
                                <th scope="row"><a href=format!("/pipelines/{}", p.id)>{p.name.clone()}</a></th>
                                <td>{p.deployed_version.map(|v| format!("v{v}")).unwrap_or_else(|| "not deployed".into())}</td>
                                <td><LabelChips labels=p.node_selector.clone()/></td>
                                <td>{format_time(p.updated_at)}</td>
                            </tr>
                        </Table>
                        {editor.then(|| view! {
                        <form class="card form" on:submit=move |ev| {
                            ev.prevent_default();
                            if let Ok(sel) = parse_label_text(&selector.get_untracked()) {
                                create.dispatch(CreatePipeline {
                                    environment_id: env_id.clone(),
                                    name: name.get_untracked(),
                                    node_selector: sel,
                                });
                            }
                        }>
                            <h2>"New pipeline"</h2>
                            <label>"Name" <input name="name" required bind:value=name placeholder="edge-logs"/></label>
                            <label>"Node selector (key=value, empty = every node)"
                                <input name="nodeSelector" bind:value=selector placeholder="tier=edge"
                                    aria-invalid=move || selector_error.get().is_some().to_string()/>
                            </label>
                            {move || selector_error.get().map(|m| view! { <p class="field-error">{m}</p> })}
                            <button type="submit" disabled=move || selector_error.get().is_some()>"Create pipeline"</button>
                        </form>
                        })}
                    }.into_any()
                }
            }}
        </Loaded>
        {move || create.value().get().map(|r| match r {
            Ok(p) => view! {
                <p class="ok" role="status">"Created " <a href=format!("/pipelines/{}", p.id)>{p.name}</a></p>
            }.into_any(),
            Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
        })}
    }
}
