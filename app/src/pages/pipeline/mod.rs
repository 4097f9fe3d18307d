//! A pipeline at `/pipelines/<id>`: the rollout view of its release, what each node is
//! served and runs, the deploy dialog, versions with diffs, and the release history.
//! Refreshes live without a reload.

use crate::components::{load, Loads};
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::pipelines::{
    diff_versions, get_pipeline, get_pipeline_summary, release_diff, DeployPipeline,
};
use crate::api::releases::latest_release_series;

mod chart;
mod deploy;
mod history;
mod nodes;
mod rollout;

use crate::components::{
    non_blank, use_session, use_tick, BannerOf, HoldBanner, LabelChips, Loaded, Table,
};
use crate::types::{format_time, DiffView, NodesQuery, PipelineDetail};
use deploy::DeployForm;
use history::History;
use nodes::{NodesShown, NodesTable};
use rollout::{RolloutActions, RolloutView};

#[component]
pub fn PipelinePage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let tick = use_tick(2_000);
    let deploy = ServerAction::<DeployPipeline>::new();
    let actions = RolloutActions::new();
    // The nodes table's filter and page: the detail brings that page of nodes with it, read
    // with the counts (one read of the fleet per refresh).
    let shown = RwSignal::new(NodesShown::default());
    let detail = load(
        move || {
            (
                id.get(),
                tick.get(),
                deploy.version().get(),
                actions.version(),
                shown.get(),
            )
        },
        |(id, _, _, _, s)| {
            get_pipeline(
                id,
                Some(NodesQuery {
                    name: non_blank(&s.name),
                    label: non_blank(&s.label),
                    status: s.status,
                    stage: s.stage.map(|n| n.to_string()),
                    offset: Some(s.offset),
                    limit: None,
                }),
            )
        },
    );
    let diff = DiffChoice {
        from: RwSignal::new(None),
        to: RwSignal::new(None),
    };
    // The diff and the history refresh on their own slower clock and after any action here;
    // they never read `detail` (reading a resource outside a Suspense stalls SSR).
    let slow_tick = use_tick(10_000);
    let changes = Memo::new(move |_| (slow_tick.get(), deploy.version().get(), actions.version()));
    // Created here, never inside a Suspend, so server and browser agree on it when hydrating.
    // What the latest release changes, shown inside the rollout card.
    let release_changes = load(
        move || (id.get(), changes.get()),
        |(id, _)| release_diff(id),
    );
    // The live per-stage charts of the latest release, on the same clock as the diff.
    let series = load(
        move || (id.get(), changes.get()),
        |(id, _)| latest_release_series(id),
    );
    let lines = load(
        move || (id.get(), diff.from.get(), diff.to.get(), changes.get()),
        |(id, from, to, _)| diff_versions(id, from, to),
    );
    // Whether the caller may deploy here: an editor of the pipeline's environment. Keyed on
    // the id only, so the deploy dialog is not rebuilt (losing its draft) on every refresh.
    let session = use_session();
    let can_deploy = load(
        move || id.get(),
        move |id| async move {
            let env = get_pipeline_summary(id).await?.environment_id;
            Ok(session.roles().await.can("editor", &env))
        },
    );
    view! {
        <HoldBanner of=Signal::derive(move || BannerOf::Pipeline(id.get()))
            refresh=Signal::derive(move || changes.get().0)/>
        <Loaded resource=detail loading="Loading pipeline..." let:d>
            <PipelineHeader d=d.clone()/>
            <RolloutView d=d.clone() actions shown diff=release_changes series/>
        </Loaded>
        <NodesTable detail shown/>
        <Loaded resource=can_deploy hide_loading=true hide_errors=true let:can>
            {can.then(|| view! { <DeployForm id deploy detail/> })}
        </Loaded>
        <Loaded resource=detail hide_loading=true hide_errors=true let:d>
            <Versions d/>
        </Loaded>
        <DiffPanel diff lines/>
        <History id refresh=Signal::derive(move || changes.get())/>
    }
}

#[component]
fn PipelineHeader(d: PipelineDetail) -> impl IntoView {
    let latest = d.release.as_ref().map(|r| {
        let status = match (r.paused.is_some(), r.status) {
            (true, _) => "Paused",
            (false, Some(s)) => s.label(),
            (false, None) => "state unreadable",
        };
        format!("v{}: {status}", r.canary_version)
    });
    let p = d.pipeline;
    view! {
        <p class="crumbs"><a href=format!("/pipelines?env={}", d.environment.name)>"Pipelines"</a>" / " {d.environment.name.clone()}</p>
        <h1>{p.name.clone()}</h1>
        <dl class="facts">
            <dt>"Deployed version"</dt>
            <dd data-testid="deployed-version">{p.deployed_version.map(|v| format!("v{v}")).unwrap_or_else(|| "not deployed".into())}</dd>
            <dt>"Latest release"</dt>
            <dd data-testid="latest-release">{match latest {
                Some(text) => view! { <a href="#rollout">{text}</a> }.into_any(),
                None => view! { <span class="muted">"none"</span> }.into_any(),
            }}</dd>
            <dt>"Node selector"</dt>
            <dd><LabelChips labels=p.node_selector.clone()/></dd>
        </dl>
    }
}

/// Which two versions the diff compares; kept at page level so refreshes keep the choice.
#[derive(Clone, Copy)]
struct DiffChoice {
    from: RwSignal<Option<i64>>,
    to: RwSignal<Option<i64>>,
}

#[component]
fn Versions(d: PipelineDetail) -> impl IntoView {
    if d.versions.is_empty() {
        return view! { <p class="empty">"No versions yet: deploy a config above."</p> }.into_any();
    }
    let deployed = d.pipeline.deployed_version;
    view! {
        <h2>"Versions"</h2>
        <Table rows=d.versions testid="versions"
            columns=&["Version", "Changelog", "Author", "Created", "Checksum"] let:v>
            <tr>
                <th scope="row">{format!("v{}", v.version)}
                    {(Some(v.version) == deployed).then(|| view! { " " <span class="badge badge-deployed">"Deployed"</span> })}
                </th>
                <td>{v.changelog.clone()}</td>
                <td>{v.author.clone()}</td>
                <td>{format_time(v.created_at)}</td>
                <td class="mono small">{v.checksum[..12.min(v.checksum.len())].to_string()}</td>
            </tr>
        </Table>
    }
    .into_any()
}

/// The diff between two chosen versions (the two newest until one is picked).
#[component]
fn DiffPanel(diff: DiffChoice, lines: Loads<DiffView>) -> impl IntoView {
    view! {
        <Loaded resource=lines hide_loading=true let:dv>
            <DiffCard dv diff/>
        </Loaded>
    }
}

/// The version pickers and the diff lines; nothing before there are two versions to compare.
#[component]
fn DiffCard(dv: DiffView, diff: DiffChoice) -> impl IntoView {
    if dv.versions.is_empty() {
        return ().into_any();
    }
    let options = |selected: i64| {
        dv.versions
            .iter()
            .map(|n| view! { <option value=n.to_string() selected=*n == selected>{format!("v{n}")}</option> })
            .collect_view()
    };
    view! {
        <section class="card" aria-label="Diff">
            <h3>"Diff"</h3>
            <div class="pickers">
                <label>"From" <select on:change=move |ev| diff.from.set(event_target_value(&ev).parse().ok())>{options(dv.from)}</select></label>
                <label>"To" <select on:change=move |ev| diff.to.set(event_target_value(&ev).parse().ok())>{options(dv.to)}</select></label>
            </div>
            <pre class="diff" data-testid="diff">
                {dv.lines.into_iter().map(|l| {
                    let class = match l.op.as_str() { "+" => "add", "-" => "del", _ => "same" };
                    view! { <span class=class>{format!("{} {}\n", l.op, l.text)}</span> }
                }).collect_view()}
            </pre>
        </section>
    }
    .into_any()
}
