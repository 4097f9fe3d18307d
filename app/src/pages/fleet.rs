//! The fleet view: the environment's nodes with labels, status, last contact and what each
//! pipeline process reports, a page at a time, filtered by name, label and status; counts
//! by status above. Refreshes every few seconds.

use crate::components::load;
use leptos::prelude::*;
use leptos_router::components::{Form, A};
use leptos_router::hooks::use_query_map;
use leptos_router::location::Url;
use leptos_router::params::ParamsMap;

use crate::api::error_text;
use crate::api::fleet::{fleet_nodes, RevokeNode};
use crate::components::{
    current_env, non_blank, use_env_name, use_session, use_tick, ErrorBox, LabelChips, Loaded,
    StatusBadge, Table,
};
use crate::types::{format_age, FleetView, NodeView};
use vf_rules::NodeStatus;

/// The filter and page the fleet table shows, as the URL says them
/// (`?name=edge&label=zone%3Deu&status=HEALTHY&offset=50`), so a filtered view can be
/// reloaded and shared.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Shown {
    name: String,
    label: String,
    status: Option<NodeStatus>,
    offset: i64,
}

impl Shown {
    fn from_query(q: &ParamsMap) -> Shown {
        let text = |k: &str| q.get(k).unwrap_or_default();
        Shown {
            name: text("name"),
            label: text("label"),
            status: NodeStatus::ALL
                .into_iter()
                .find(|s| s.as_str() == text("status")),
            offset: text("offset").parse().unwrap_or(0).max(0),
        }
    }

    fn is_filtered(&self) -> bool {
        !self.name.trim().is_empty() || !self.label.trim().is_empty() || self.status.is_some()
    }

    /// The query string of this view at another offset, keeping the environment.
    fn href(&self, env: &str, offset: i64) -> String {
        let mut pairs = vec![("env", env.to_string())];
        pairs.push(("name", self.name.clone()));
        pairs.push(("label", self.label.clone()));
        pairs.push((
            "status",
            self.status
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
        ));
        pairs.push(("offset", offset.to_string()));
        let query: Vec<String> = pairs
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", Url::escape(&v)))
            .collect();
        format!("/?{}", query.join("&"))
    }
}

#[component]
pub fn FleetPage() -> impl IntoView {
    let env_name = use_env_name();
    let session = use_session();
    let tick = use_tick(3_000);
    let revoke = ServerAction::<RevokeNode>::new();
    let query = use_query_map();
    let shown = Memo::new(move |_| query.with(Shown::from_query));
    let fleet = load(
        move || {
            (
                env_name.get(),
                tick.get(),
                revoke.version().get(),
                shown.get(),
            )
        },
        move |(name, _, _, shown)| async move {
            let Some(env) = current_env(name).await? else {
                return Ok(None);
            };
            let f = fleet_nodes(
                env.id.clone(),
                non_blank(&shown.name),
                non_blank(&shown.label),
                shown.status,
                Some(shown.offset),
                None,
            )
            .await?;
            // Revoking a node is an admin's call; everyone else sees the fleet.
            let admin = session.roles().await.can("admin", &env.id);
            Ok(Some((env, f, admin, shown)))
        },
    );
    view! {
        <h1>"Fleet"</h1>
        <FleetFilters env_name shown/>
        <Loaded resource=fleet loading="Loading fleet..." let:loaded>
            {match loaded {
                None => view! {
                    <p class="empty">"No environment yet. Create one under Environments."</p>
                }.into_any(),
                Some((env, f, admin, shown)) => {
                    view! { <FleetTable env=env.name f shown revoke=admin.then_some(revoke)/> }.into_any()
                }
            }}
        </Loaded>
        {move || revoke.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
    }
}

/// Name, label and status filters: a GET form, so applying them changes the URL (and works
/// before the app is interactive); a new filter starts at the first page.
#[component]
fn FleetFilters(env_name: Memo<Option<String>>, shown: Memo<Shown>) -> impl IntoView {
    let current = shown.get_untracked();
    view! {
        <Form method="get" action="/" attr:class="card form filters" attr:data-testid="fleet-filters">
            {move || env_name.get().map(|env| view! { <input type="hidden" name="env" value=env/> })}
            <label>"Name contains" <input type="search" name="name" value=current.name/></label>
            <label>"Label" <input name="label" value=current.label placeholder="zone=eu"/></label>
            <label>"Status"
                <select name="status">
                    <option value="" selected=current.status.is_none()>"Any"</option>
                    {NodeStatus::ALL.into_iter().map(|s| view! {
                        <option value=s.as_str() selected=current.status == Some(s)>{s.as_str()}</option>
                    }).collect_view()}
                </select>
            </label>
            <button type="submit">"Filter"</button>
        </Form>
    }
}

#[component]
fn FleetTable(
    env: String,
    f: FleetView,
    shown: Shown,
    revoke: Option<ServerAction<RevokeNode>>,
) -> impl IntoView {
    let healthy = f
        .by_status
        .iter()
        .find(|(s, _)| *s == NodeStatus::Healthy)
        .map_or(0, |(_, n)| *n);
    let summary = (f.total > 0).then(|| {
        let total = f.total;
        let others: Vec<String> = f
            .by_status
            .iter()
            .filter(|(s, n)| *s != NodeStatus::Healthy && *n > 0)
            .map(|(s, n)| format!("{n} {}", s.as_str().to_lowercase()))
            .collect();
        let others = if others.is_empty() {
            String::new()
        } else {
            format!(", {}", others.join(", "))
        };
        view! {
            <p class="summary" data-testid="fleet-summary">
                {format!("{total} nodes in {env}, {healthy} healthy{others}")}
            </p>
        }
    });
    let empty = if shown.is_filtered() {
        "No node matches the filter.".to_string()
    } else {
        format!(
            "No nodes in {env} yet. Start an agent with an enrollment token of this environment."
        )
    };
    let pager = (f.matched > f.limit || f.offset > 0).then(|| {
        let (offset, limit, matched) = (f.offset, f.limit, f.matched);
        let last = (offset + f.nodes.len() as i64).min(matched);
        let previous = (offset > 0).then(|| shown.href(&env, (offset - limit).max(0)));
        let next = (last < matched).then(|| shown.href(&env, offset + limit));
        view! {
            <nav class="pager" aria-label="Pages of nodes" data-testid="fleet-pager">
                {previous.map(|href| view! { <A href=href>"Previous"</A> })}
                <span>{format!("{}-{last} of {matched}", (offset + 1).min(matched))}</span>
                {next.map(|href| view! { <A href=href>"Next"</A> })}
            </nav>
        }
    });
    view! {
        {summary}
        <Table rows=f.nodes testid="fleet-table"
            columns=&["Node", "Status", "Labels", "Last seen", "Agent", "Pipelines"] actions=true
            empty=empty
            let:n>
            <NodeRow n revoke/>
        </Table>
        {pager}
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
                <div><a href=format!("/nodes/{}", n.id)>{n.name.clone()}</a></div>
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
