//! Node groups: named label criteria, with the nodes they match right now.

use leptos::prelude::*;

use crate::api::error_text;
use crate::api::fleet::{list_node_groups, CreateNodeGroup, DeleteNodeGroup};
use crate::components::{current_env, use_env_name, use_session, ErrorBox, LabelChips};
use crate::types::parse_label_text;

#[component]
pub fn GroupsPage() -> impl IntoView {
    let env_name = use_env_name();
    let session = use_session();
    let create = ServerAction::<CreateNodeGroup>::new();
    let delete = ServerAction::<DeleteNodeGroup>::new();
    let groups = Resource::new(
        move || {
            (
                env_name.get(),
                create.version().get(),
                delete.version().get(),
            )
        },
        |(name, _, _)| async move {
            match current_env(name).await? {
                Some(env) => list_node_groups(env.id.clone())
                    .await
                    .map(|g| Some((env, g))),
                None => Ok(None),
            }
        },
    );
    let name = RwSignal::new(String::new());
    let criteria = RwSignal::new(String::new());
    let criteria_error = Memo::new(move |_| parse_label_text(&criteria.get()).err());
    view! {
        <h1>"Node groups"</h1>
        <p class="muted">
            "A node belongs to a group when its labels match every criterion. Empty criteria match every node."
        </p>
        <Transition fallback=|| view! { <p class="muted">"Loading..."</p> }>
            {move || Suspend::new(async move {
                match groups.await {
                    Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
                    Ok(None) => view! { <p class="empty">"No environment yet."</p> }.into_any(),
                    Ok(Some((env, groups))) => {
                        let env_id = env.id.clone();
                        let editor = session.roles().await.can("editor", &env.id);
                        view! {
                            <table class="grid" data-testid="groups-table">
                                <thead><tr>
                                    <th scope="col">"Group"</th>
                                    <th scope="col">"Criteria"</th>
                                    <th scope="col">"Matching nodes"</th>
                                    <th scope="col"><span class="sr-only">"Actions"</span></th>
                                </tr></thead>
                                <tbody>
                                    {groups.into_iter().map(|g| {
                                        let id = g.id.clone();
                                        let group_name = g.name.clone();
                                        view! {
                                            <tr>
                                                <th scope="row">{g.name.clone()}</th>
                                                <td><LabelChips labels=g.criteria.clone()/></td>
                                                <td>{format!("{} - {}", g.matching_nodes.len(), g.matching_nodes.join(", "))}</td>
                                                <td>{editor.then(|| view! {
                                                    <button class="danger small" on:click=move |_| {
                                                        let ok = crate::components::confirmed(&format!("Delete node group {group_name}?"));
                                                        if ok { delete.dispatch(DeleteNodeGroup { id: id.clone() }); }
                                                    }>"Delete"</button>
                                                })}</td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                            {editor.then(|| view! {
                            <form class="card form" on:submit=move |ev| {
                                ev.prevent_default();
                                if let Ok(c) = parse_label_text(&criteria.get_untracked()) {
                                    create.dispatch(CreateNodeGroup {
                                        environment_id: env_id.clone(),
                                        name: name.get_untracked(),
                                        criteria: c,
                                    });
                                }
                            }>
                                <h2>"New node group"</h2>
                                <label>"Name" <input required bind:value=name/></label>
                                <label>"Criteria (key=value, comma separated)"
                                    <input bind:value=criteria placeholder="tier=edge, region=eu"
                                        aria-invalid=move || criteria_error.get().is_some().to_string()/>
                                </label>
                                {move || criteria_error.get().map(|m| view! { <p class="field-error">{m}</p> })}
                                <button type="submit" disabled=move || criteria_error.get().is_some()>"Create group"</button>
                            </form>
                            })}
                        }.into_any()
                    }
                }
            })}
        </Transition>
        {move || create.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
        {move || delete.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
    }
}
