//! The fleet view: every node of the environment with labels, status, last contact and
//! what each pipeline process reports. Refreshes every few seconds.

use leptos::prelude::*;

use crate::api::error_text;
use crate::api::fleet::{fleet_nodes, RevokeNode};
use crate::components::{
    current_env, use_env_name, use_session, use_tick, ErrorBox, LabelChips, Loaded, StatusBadge,
    Table,
};
use crate::types::{format_age, FleetView, NodeView};

#[component]
pub fn FleetPage() -> impl IntoView {
    let env_name = use_env_name();
    let session = use_session();
    let tick = use_tick(3_000);
    let revoke = ServerAction::<RevokeNode>::new();
    let fleet = Resource::new(
        move || (env_name.get(), tick.get(), revoke.version().get()),
        move |(name, _, _)| async move {
            let Some(env) = current_env(name).await? else {
                return Ok(None);
            };
            let f = fleet_nodes(env.id.clone()).await?;
            // Revoking a node is an admin's call; everyone else sees the fleet.
            let admin = session.roles().await.can("admin", &env.id);
            Ok(Some((env, f, admin)))
        },
    );
    view! {
        <h1>"Fleet"</h1>
        <Loaded resource=fleet loading="Loading fleet..." let:loaded>
            {match loaded {
                None => view! {
                    <p class="empty">"No environment yet. Create one under Environments."</p>
                }.into_any(),
                Some((env, f, admin)) => {
                    view! { <FleetTable env=env.name f revoke=admin.then_some(revoke)/> }.into_any()
                }
            }}
        </Loaded>
        {move || revoke.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
    }
}

#[component]
fn FleetTable(
    env: String,
    f: FleetView,
    revoke: Option<ServerAction<RevokeNode>>,
) -> impl IntoView {
    let count = f.nodes.len();
    let healthy = f
        .nodes
        .iter()
        .filter(|n| n.status == vf_rules::NodeStatus::Healthy)
        .count();
    let summary = (count > 0).then(|| {
        view! {
            <p class="summary" data-testid="fleet-summary">
                {format!("{count} nodes in {env}, {healthy} healthy")}
            </p>
        }
    });
    view! {
        {summary}
        <Table rows=f.nodes testid="fleet-table"
            columns=&["Node", "Status", "Labels", "Last seen", "Agent", "Pipelines"] actions=true
            empty=format!("No nodes in {env} yet. Start an agent with an enrollment token of this environment.")
            let:n>
            <NodeRow n revoke/>
        </Table>
    }
}

#[component]
fn NodeRow(n: NodeView, revoke: Option<ServerAction<RevokeNode>>) -> impl IntoView {
    let (node_id, node_name) = (n.id.clone(), n.name.clone());
    let seen = n
        .last_seen_age_ms
        .map(format_age)
        .unwrap_or_else(|| "never".into());
    view! {
        <tr data-node=n.name.clone()>
            <th scope="row">
                <div>{n.name.clone()}</div>
                <div class="muted small">{n.kind.clone()}</div>
            </th>
            <td><StatusBadge status=n.status/></td>
            <td><LabelChips labels=n.labels.clone()/></td>
            <td>{seen}</td>
            <td>{n.agent_version.clone().unwrap_or_else(|| "-".into())}</td>
            <td>
                {if n.pipelines.is_empty() {
                    view! { <span class="muted">"none reported"</span> }.into_any()
                } else {
                    view! {
                        <ul class="plain">
                            {n.pipelines
                                .into_iter()
                                .map(|p| {
                                    let version = p.version.map(|v| format!("v{v}")).unwrap_or_else(|| "-".into());
                                    let version_attr = version.clone();
                                    view! {
                                        <li data-pipeline=p.pipeline_name.clone() data-version=version_attr>
                                            <strong>{p.pipeline_name.clone()}</strong>" "{version}" "
                                            <StatusBadge status=p.status.clone()/>
                                            <span class="muted small">
                                                {format!(" {} in, {} errors", p.events_in, p.errors_total)}
                                            </span>
                                        </li>
                                    }
                                })
                                .collect_view()}
                        </ul>
                    }.into_any()
                }}
            </td>
            <td>{revoke.map(|revoke| view! {
                <button class="danger small" aria-label=format!("Revoke node {node_name}") on:click=move |_| {
                    let ok = crate::components::confirmed(&format!("Revoke node {node_name}? Its next poll is refused and it leaves the fleet."));
                    if ok { revoke.dispatch(RevokeNode { node_id: node_id.clone() }); }
                }>"Revoke"</button>
            })}</td>
        </tr>
    }
}
