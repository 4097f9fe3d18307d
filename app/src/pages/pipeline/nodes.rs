//! The pipeline's nodes, a page at a time: what each is served and runs, filtered by name,
//! label, status and the stage that added it. Stage cards open it filtered to their stage.

use crate::components::Loads;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use vf_rules::NodeStatus;

use crate::components::{non_blank, Loaded, StatusBadge, Table};
use crate::types::{PipelineDetail, PipelineNodesPage};

/// The filter and page the nodes table shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodesShown {
    pub name: String,
    pub label: String,
    pub status: Option<NodeStatus>,
    /// The stage (1-based) whose nodes to show.
    pub stage: Option<i64>,
    pub offset: i64,
}

impl NodesShown {
    /// The nodes stage `n` (1-based) added, from the first page.
    pub fn of_stage(n: i64) -> NodesShown {
        NodesShown {
            stage: Some(n),
            ..NodesShown::default()
        }
    }
}

#[component]
pub fn NodesTable(
    /// The pipeline, with the page of nodes `shown` asks for.
    detail: Loads<PipelineDetail>,
    shown: RwSignal<NodesShown>,
) -> impl IntoView {
    view! {
        <section aria-label="Nodes" id="pipeline-nodes">
            <h2>"Nodes"</h2>
            <NodeFilters shown/>
            <Loaded resource=detail loading="Loading nodes..." hide_errors=true let:d>
                {d.nodes.map(|page| view! { <NodesPage page shown/> })}
            </Loaded>
        </section>
    }
}

/// Name, label, status and stage filters; applying them goes back to the first page. The
/// fields follow `shown`, so a stage card's "Show its nodes" fills them in.
#[component]
fn NodeFilters(shown: RwSignal<NodesShown>) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let label = RwSignal::new(String::new());
    let status = RwSignal::new(String::new());
    let stage = RwSignal::new(String::new());
    Effect::new(move |_| {
        let s = shown.get();
        name.set(s.name);
        label.set(s.label);
        status.set(s.status.map(|s| s.as_str().to_string()).unwrap_or_default());
        stage.set(s.stage.map(|n| n.to_string()).unwrap_or_default());
    });
    view! {
        <form class="card form filters" data-testid="pipeline-node-filters" on:submit=move |ev| {
            ev.prevent_default();
            shown.set(NodesShown {
                name: name.get_untracked(),
                label: label.get_untracked(),
                status: NodeStatus::ALL.into_iter().find(|s| s.as_str() == status.get_untracked()),
                stage: stage.get_untracked().trim().parse().ok().filter(|n: &i64| *n >= 1),
                offset: 0,
            });
        }>
            <label>"Name contains" <input type="search" bind:value=name/></label>
            <label>"Label" <input bind:value=label placeholder="zone=eu"/></label>
            <label>"Status"
                <select prop:value=move || status.get() on:change=move |ev| status.set(event_target_value(&ev))>
                    <option value="">"Any"</option>
                    {NodeStatus::ALL.into_iter().map(|s| view! { <option value=s.as_str()>{s.as_str()}</option> }).collect_view()}
                </select>
            </label>
            <label>"Stage" <input type="number" min="1" class="short" bind:value=stage/></label>
            <button type="submit">"Filter"</button>
        </form>
    }
}

#[component]
fn NodesPage(page: PipelineNodesPage, shown: RwSignal<NodesShown>) -> impl IntoView {
    let filtered = shown.with_untracked(|s| {
        non_blank(&s.name).is_some()
            || non_blank(&s.label).is_some()
            || s.status.is_some()
            || s.stage.is_some()
    });
    let empty = if filtered {
        "No node of this pipeline matches the filter."
    } else {
        "The pipeline's node selector admits no node of this environment yet."
    };
    let (offset, limit, matched) = (page.offset, page.limit, page.matched);
    let last = (offset + page.nodes.len() as i64).min(matched);
    let go = move |to: i64| shown.update(|s| s.offset = to.max(0));
    let summary = format!(
        "{} of the pipeline's {} nodes match{}",
        matched,
        page.total,
        if matched > 0 {
            format!(", showing {}-{last}", offset + 1)
        } else {
            String::new()
        }
    );
    view! {
        <p class="summary" data-testid="pipeline-nodes-summary">{summary}</p>
        <Table rows=page.nodes testid="pipeline-nodes" empty=empty.to_string()
            columns=&["Node", "Agent", "Stage", "Served", "Running", "Process", "Events in", "Errors"] let:n>
            {
                let running = n.running_version.map(|v| format!("v{v}")).unwrap_or_else(|| "-".into());
                let running_attr = running.clone();
                let served = match n.served_version {
                    Some(v) => format!("v{v} ({})", n.served.label()),
                    None => n.served.label().to_string(),
                };
                view! {
                    <tr data-node=n.node_name.clone() data-running=running_attr>
                        <th scope="row"><a href=format!("/nodes/{}", n.node_id)>{n.node_name.clone()}</a></th>
                        <td><StatusBadge status=n.node_status/></td>
                        <td>{n.stage.map(|s| s.to_string()).unwrap_or_else(|| "-".into())}</td>
                        <td>{served}</td>
                        <td>{running}</td>
                        <td>{match n.process_status.clone() {
                            Some(s) => view! { <StatusBadge status=s/> }.into_any(),
                            None => view! { <span class="muted">"-"</span> }.into_any(),
                        }}</td>
                        <td class="num">{n.events_in}</td>
                        <td class="num">{n.errors_total}</td>
                    </tr>
                }
            }
        </Table>
        {(matched > limit || offset > 0).then(|| view! {
            <nav class="pager" aria-label="Pages of nodes" data-testid="pipeline-nodes-pager">
                <button type="button" class="small" disabled=offset == 0 on:click=move |_| go(offset - limit)>"Previous"</button>
                <span>{format!("{}-{last} of {matched}", (offset + 1).min(matched))}</span>
                <button type="button" class="small" disabled=last >= matched on:click=move |_| go(offset + limit)>"Next"</button>
            </nav>
        })}
    }
}
