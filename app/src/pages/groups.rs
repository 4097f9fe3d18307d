//! Node groups: named label criteria, with the nodes they match right now.

use crate::components::load;
use leptos::prelude::*;

use crate::api::error_text;
use crate::api::fleet::{list_node_groups, CreateNodeGroup, DeleteNodeGroup};
use crate::components::{
    current_env, use_env_name, use_session, ErrorBox, LabelChips, Loaded, Table,
};
use crate::types::parse_label_text;

#[component]
pub fn GroupsPage() -> impl IntoView {
    let env_name = use_env_name();
    let session = use_session();
    let create = ServerAction::<CreateNodeGroup>::new();
    let delete = ServerAction::<DeleteNodeGroup>::new();
    let groups = load(
        move || {
            (
                env_name.get(),
                create.version().get(),
                delete.version().get(),
            )
        },
        move |(name, _, _)| async move {
            let Some(env) = current_env(name).await? else {
                return Ok(None);
            };
            let groups = list_node_groups(env.id.clone()).await?;
            let editor = session.roles().await.can("editor", &env.id);
            Ok(Some((env, groups, editor)))
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
        <Loaded resource=groups let:loaded>
            {match loaded {
                None => view! { <p class="empty">"No environment yet."</p> }.into_any(),
                Some((env, groups, editor)) => {
                    let env_id = env.id.clone();
                    view! {
                        <Table rows=groups testid="groups-table"
                            columns=&["Group", "Criteria", "Matching nodes"] actions=true let:g>
                            {
                                let id = g.id.clone();
                                let group_name = g.name.clone();
                                view! {
                                    <tr>
                                        <th scope="row">{g.name.clone()}</th>
                                        <td><LabelChips labels=g.criteria.clone()/></td>
                                        <td>{match g.matching_count {
                                            0 => "0".to_string(),
                                            n if n as usize > g.matching_sample.len() => format!("{n} - {}, ...", g.matching_sample.join(", ")),
                                            n => format!("{n} - {}", g.matching_sample.join(", ")),
                                        }}</td>
                                        <td>{editor.then(|| view! {
                                            <button class="danger small" on:click=move |_| {
                                                let ok = crate::components::confirmed(&format!("Delete node group {group_name}?"));
                                                if ok { delete.dispatch(DeleteNodeGroup { id: id.clone() }); }
                                            }>"Delete"</button>
                                        })}</td>
                                    </tr>
                                }
                            }
                        </Table>
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
            }}
        </Loaded>
        {move || create.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
        {move || delete.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
    }
}
