//! `/nodes/<id>`: one node: who it is, its labels and status, what it runs (version, process
//! status, counters per pipeline), what its agent last said of the host and of itself, its
//! newest log lines, and (for editors) sampling, tapping and restarting its pipelines
//! ([`live`]). Refreshes every 5 s.

mod live;

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::fleet::get_node;
use crate::components::{load, use_tick, Can, LabelChips, Loaded, StatusBadge, Table};
use crate::types::{format_age, format_time, NodeDetailView};

#[component]
pub fn NodePage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let tick = use_tick(5_000);
    let node = load(move || (id.get(), tick.get()), |(id, _)| get_node(id));
    // Owned by the page, so a sample or tap in progress outlives the 5 s refresh.
    let states = live::LiveStates::default();
    view! {
        <Loaded resource=node loading="Loading node..." let:d>
            <NodeDetail d states/>
        </Loaded>
    }
}

/// Per pipeline the node runs, a live panel, for editors of its environment, when the node
/// can be asked (a vf-agent, not revoked).
#[component]
fn LiveSection(d: NodeDetailView, states: live::LiveStates) -> impl IntoView {
    if !d.live || d.node.pipelines.is_empty() {
        return None;
    }
    let node_id = d.node.id.clone();
    let panels = StoredValue::new(
        d.node
            .pipelines
            .iter()
            .map(|p| {
                let components = d
                    .components
                    .get(&p.pipeline_id)
                    .cloned()
                    .unwrap_or_default();
                let state = states.of(&p.pipeline_id, &components);
                (
                    p.pipeline_id.clone(),
                    p.pipeline_name.clone(),
                    components,
                    state,
                )
            })
            .collect::<Vec<_>>(),
    );
    Some(view! {
        <Can role="editor" env=d.environment_id.clone()>
            <h2>"Live"</h2>
            <p class="muted small">
                "Sampled and tapped events come from the node itself and are never written to the server's log."
            </p>
            {panels.with_value(|panels| panels.iter().map(|(pid, name, components, state)| view! {
                <live::LivePipeline node_id=node_id.clone() pipeline_id=pid.clone()
                    pipeline_name=name.clone() components=components.clone() state=*state/>
            }).collect_view())}
        </Can>
    })
}

#[component]
fn NodeDetail(d: NodeDetailView, states: live::LiveStates) -> impl IntoView {
    let n = d.node.clone();
    let seen = d
        .last_seen_at
        .map(|t| format!("{} ({})", format_age(d.now - t), format_time(t)))
        .unwrap_or_else(|| "never".into());
    view! {
        <p class="crumbs"><a href="/">"Fleet"</a>" / " {n.name.clone()}</p>
        <h1 data-testid="node-name">{n.name.clone()} " " <StatusBadge status=n.status/></h1>
        {d.revoked.then(|| view! { <p class="failure" role="alert">"This node was revoked: its token no longer works."</p> })}
        <dl class="facts" data-testid="node-facts">
            <dt>"Hostname"</dt><dd>{d.hostname.clone()}</dd>
            <dt>"Kind"</dt><dd>{n.kind.clone()}</dd>
            <dt>"Agent"</dt><dd>{n.agent_version.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>"Vector"</dt><dd>{d.vector_version.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>"OS"</dt><dd>{d.os.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>"Last seen"</dt><dd data-testid="last-seen">{seen}</dd>
            <dt>"Enrolled"</dt><dd>{format_time(d.enrolled_at)}</dd>
            <dt>"Labels"</dt><dd><LabelChips labels=n.labels.clone()/></dd>
        </dl>
        <h2>"Pipelines"</h2>
        {if n.pipelines.is_empty() {
            view! { <p class="empty">"This node has reported no pipeline yet."</p> }.into_any()
        } else {
            view! {
                <Table rows=n.pipelines.clone() testid="node-pipelines"
                    columns=&["Pipeline", "Version", "Process", "Events in", "Errors", "Message"] let:p>
                    <tr data-pipeline=p.pipeline_name.clone()>
                        <th scope="row"><a href=format!("/pipelines/{}", p.pipeline_id)>{p.pipeline_name.clone()}</a></th>
                        <td>{p.version.map(|v| format!("v{v}")).unwrap_or_else(|| "-".into())}</td>
                        <td><StatusBadge status=p.status.clone()/></td>
                        <td>{p.events_in}</td>
                        <td>{p.errors_total}</td>
                        <td class="small">{p.message.clone().unwrap_or_default()}</td>
                    </tr>
                </Table>
            }.into_any()
        }}
        <div class="columns">
            <Fields title="Host" testid="host-metrics" fields=d.host_metrics.clone()
                empty="No host metrics reported."/>
            <Fields title="Agent health" testid="agent-health" fields=d.agent_health.clone()
                empty="The agent has not reported its health."/>
        </div>
        {(!d.component_metrics.is_empty()).then(|| {
            let name_of = |id: &str| n.pipelines.iter().find(|p| p.pipeline_id == id)
                .map(|p| p.pipeline_name.clone()).unwrap_or_else(|| id.to_owned());
            view! {
                <div class="columns">
                    {d.component_metrics.iter().map(|(id, fields)| view! {
                        <Fields title=format!("Components of {}", name_of(id)) testid="component-metrics"
                            fields=fields.clone() empty="No component metrics reported."/>
                    }).collect_view()}
                </div>
            }
        })}
        <LiveSection d=d.clone() states/>
        <h2>"History"</h2>
        {if d.history.is_empty() {
            view! { <p class="empty">"Nothing recorded for this node yet."</p> }.into_any()
        } else {
            view! {
                <ul class="history small" data-testid="node-history">
                    {d.history.iter().map(|(at, actor, action)| view! {
                        <li>{format!("{} {action} by {actor}", format_time(*at))}</li>
                    }).collect_view()}
                </ul>
            }.into_any()
        }}
        <h2>"Recent logs"</h2>
        {if d.logs.is_empty() {
            view! { <p class="empty">"No log lines from this node yet."</p> }.into_any()
        } else {
            view! {
                <pre class="logs" data-testid="node-logs">
                    {d.logs.iter().map(|(pipeline, at, line)| {
                        format!("{} {pipeline}: {line}\n", format_time(*at))
                    }).collect::<String>()}
                </pre>
            }.into_any()
        }}
    }
}

/// `(field, value)` pairs as a definition list under a heading.
#[component]
fn Fields(
    #[prop(into)] title: String,
    testid: &'static str,
    fields: Vec<(String, String)>,
    empty: &'static str,
) -> impl IntoView {
    let label = title.clone();
    view! {
        <section class="card" aria-label=label>
            <h3>{title}</h3>
            {if fields.is_empty() {
                view! { <p class="muted">{empty}</p> }.into_any()
            } else {
                view! {
                    <dl class="facts small" data-testid=testid>
                        {fields.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
                    </dl>
                }.into_any()
            }}
        </section>
    }
}
