//! `/admin/edge-config`: rolling rollouts by customer bucket. One card per rollout with its
//! percent (slider and number, previewed before saving), previous percent and when it
//! changed, org overrides, a bucket lookup, the change history and the published document.

use leptos::prelude::*;

use crate::api::edge::{edge_admin, DeleteRollout, RemoveOrgOverride, SetRolloutPercent};
use crate::api::error_text;
use crate::components::{use_session, ErrorBox, Loaded, Table};
use crate::types::{format_time, preview_change, EdgeAdminView, RollingView};

#[derive(Clone, Copy)]
struct EdgeActions {
    set: ServerAction<SetRolloutPercent>,
    remove: ServerAction<RemoveOrgOverride>,
    delete: ServerAction<DeleteRollout>,
}

impl EdgeActions {
    fn error(&self) -> Option<String> {
        let a = self.set.value().get().and_then(|r| r.err());
        let b = self.remove.value().get().and_then(|r| r.err());
        let c = self.delete.value().get().and_then(|r| r.err());
        a.or(b).or(c).map(|e| error_text(&e))
    }
}

#[component]
pub fn EdgeConfigPage() -> impl IntoView {
    let actions = EdgeActions {
        set: ServerAction::new(),
        remove: ServerAction::new(),
        delete: ServerAction::new(),
    };
    let session = use_session();
    let data = Resource::new(
        move || {
            (
                actions.set.version().get(),
                actions.remove.version().get(),
                actions.delete.version().get(),
            )
        },
        move |_| async move {
            let v = edge_admin().await?;
            // Changing rollouts is for admins of every environment; viewers read.
            let editable = session.roles().await.can("admin", "*");
            Ok((v, editable))
        },
    );
    view! {
        <h1>"Edge config: rolling rollouts"</h1>
        <p class="muted">
            "Customers are bucketed 0-99 by a hash of their id (the same as Bun.hash). A rollout at N% sends buckets 0..N-1 to the new path; an org override wins over the global percent."
        </p>
        {move || actions.error().map(|m| view! { <ErrorBox message=m/> })}
        <Loaded resource=data let((v, editable))>
            <EdgeAdmin v actions editable/>
        </Loaded>
    }
}

#[component]
fn EdgeAdmin(v: EdgeAdminView, actions: EdgeActions, editable: bool) -> impl IntoView {
    let rollouts = v.rollouts.clone();
    view! {
        <section class="card" aria-label="Published document" data-testid="edge-health">
            <strong>"Published document "</strong>
            <span class="mono">{format!("v{}", v.version)}</span>
            " - "
            {if v.generated_at > 0 { format!("last changed {}", format_time(v.generated_at)) } else { "no change yet".into() }}
            " - " {format!("{} rollout(s)", v.rollouts.len())}
            " - served at " <code>"GET /api/edge-config"</code>
        </section>
        <BucketLookup rollouts=rollouts.clone()/>
        {editable.then(|| view! { <NewRollout actions/> })}
        <div class="rolling-cards">
            {rollouts.into_iter().map(|r| view! { <RolloutCard r actions editable/> }).collect_view()}
        </div>
        <section aria-label="Change history">
            <h2>"Change history"</h2>
            <Table rows=v.history class="grid compact" testid="edge-history"
                columns=&["When", "Who", "Rollout", "Change", "Before / after"] let:h>
                <tr>
                    <td>{format_time(h.at)}</td><td>{h.actor}</td><td>{h.rollout}</td>
                    <td>{h.action}</td><td class="mono small">{h.details}</td>
                </tr>
            </Table>
        </section>
    }
}

#[component]
fn BucketLookup(rollouts: Vec<RollingView>) -> impl IntoView {
    let customer = RwSignal::new(String::new());
    let org = RwSignal::new(String::new());
    let rollouts = StoredValue::new(rollouts);
    let result = move || {
        let id = customer.get();
        if id.is_empty() {
            return None;
        }
        let bucket = vf_rolling::bucket(&id);
        let org = org.get();
        let rows = rollouts.with_value(|rs| {
            rs.iter()
                .filter(|r| r.retired_at.is_none())
                .map(|r| {
                    let global = vf_rolling::enabled(&r.global, bucket);
                    let for_org = r
                        .orgs
                        .iter()
                        .find(|(o, _)| !org.is_empty() && *o == org)
                        .map(|(_, e)| vf_rolling::enabled(e, bucket));
                    (r.name.clone(), global, for_org)
                })
                .collect::<Vec<_>>()
        });
        Some((bucket, rows))
    };
    let on_off = |b: bool| if b { "ON (new path)" } else { "off (old path)" };
    view! {
        <section class="card" aria-label="Bucket lookup">
            <h2>"Bucket lookup"</h2>
            <div class="form inline">
                <label>"Customer id" <input bind:value=customer placeholder="cus_abc123"/></label>
                <label>"Org (optional)" <input bind:value=org placeholder="org_1"/></label>
            </div>
            {move || result().map(|(bucket, rows)| view! {
                <p data-testid="lookup-bucket"><strong>{format!("Bucket {bucket}")}</strong></p>
                <ul class="plain">
                    {rows.into_iter().map(|(name, global, for_org)| view! {
                        <li>
                            <strong>{name}</strong>": globally " {on_off(global)}
                            {for_org.map(|o| format!("; for this org {}", on_off(o)))}
                        </li>
                    }).collect_view()}
                </ul>
            })}
        </section>
    }
}

#[component]
fn NewRollout(actions: EdgeActions) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let percent = RwSignal::new("0".to_string());
    view! {
        <form class="card form inline" aria-label="New rollout" on:submit=move |ev| {
            ev.prevent_default();
            actions.set.dispatch(SetRolloutPercent {
                name: name.get_untracked(),
                org: None,
                percent: percent.get_untracked().trim().parse().unwrap_or(-1),
                row_version: None,
            });
        }>
            <label>"New rollout name" <input required bind:value=name placeholder="v2-cache"/></label>
            <label>"Percent" <input type="number" min="0" max="100" step="1" bind:value=percent/></label>
            <button type="submit">"Create rollout"</button>
        </form>
    }
}

#[component]
fn RolloutCard(r: RollingView, actions: EdgeActions, editable: bool) -> impl IntoView {
    let saved = r.global.percent;
    let draft = RwSignal::new(saved as i64);
    let name = StoredValue::new(r.name.clone());
    let version = r.row_version;
    let new_org = RwSignal::new(String::new());
    let new_org_percent = RwSignal::new("0".to_string());
    let retired = r.retired_at.is_some();
    view! {
        <article class="card rolling" data-rollout=r.name.clone() aria-label=format!("Rollout {}", r.name)>
            <header class="rollout-head">
                <h2>{r.name.clone()}</h2>
                {retired.then(|| view! { <span class="badge badge-rolled-back">"DELETED"</span> })}
                <span class="muted">{format!(
                    "now {}% (was {}%, changed {})",
                    r.global.percent, r.global.previous_percent,
                    if r.global.changed_at > 0 { format_time(r.global.changed_at) } else { "never".into() }
                )}</span>
            </header>
            {editable.then(|| view! {
            <form class="form inline" on:submit=move |ev| {
                ev.prevent_default();
                actions.set.dispatch(SetRolloutPercent { name: name.get_value(), org: None, percent: draft.get_untracked(), row_version: Some(version) });
            }>
                <label>"Global percent"
                    <input type="range" min="0" max="100" step="1"
                        prop:value=move || draft.get().to_string()
                        on:input=move |ev| draft.set(event_target_value(&ev).parse().unwrap_or(0))/>
                </label>
                <input type="number" min="0" max="100" step="1" aria-label="Global percent number"
                    prop:value=move || draft.get().to_string()
                    on:input=move |ev| draft.set(event_target_value(&ev).parse().unwrap_or(0))/>
                <button type="submit" disabled=move || draft.get() == saved as i64>"Save"</button>
            </form>
            <p class="muted small" data-testid="percent-preview">
                {move || (draft.get() != saved as i64).then(|| preview_change(saved, draft.get().clamp(0, 100) as u8))}
            </p>
            })}
            <h3>"Org overrides"</h3>
            <Table rows=r.orgs.clone() class="grid compact"
                columns=&["Org", "Percent", "Previous", "Changed"] actions=true let((org, e))>
                {
                    let org_name = StoredValue::new(org.clone());
                    view! {
                        <tr data-org=org.clone()>
                            <th scope="row">{org.clone()}</th>
                            <td>{format!("{}%", e.percent)}</td>
                            <td>{format!("{}%", e.previous_percent)}</td>
                            <td>{format_time(e.changed_at)}</td>
                            <td>{editable.then(|| view! { <button class="danger small" on:click=move |_| {
                                let ok = crate::components::confirmed(&format!("Remove the override of {}? Its customers route by the global percent again.", org_name.get_value()));
                                if ok { actions.remove.dispatch(RemoveOrgOverride { name: name.get_value(), org: org_name.get_value(), row_version: version }); }
                            }>"Remove"</button> })}</td>
                        </tr>
                    }
                }
            </Table>
            {editable.then(|| view! {
            <form class="form inline" on:submit=move |ev| {
                ev.prevent_default();
                actions.set.dispatch(SetRolloutPercent {
                    name: name.get_value(),
                    org: Some(new_org.get_untracked()),
                    percent: new_org_percent.get_untracked().trim().parse().unwrap_or(-1),
                    row_version: Some(version),
                });
            }>
                <label>"Org" <input required bind:value=new_org placeholder="org_1"/></label>
                <label>"Percent" <input type="number" min="0" max="100" step="1" bind:value=new_org_percent/></label>
                <button type="submit">"Set override"</button>
            </form>
            })}
            {(editable && !retired).then(|| view! {
                <button class="danger small" on:click=move |_| {
                    let ok = crate::components::confirmed(&format!("Delete rollout {}? Every customer goes back to the old path.", name.get_value()));
                    if ok { actions.delete.dispatch(DeleteRollout { name: name.get_value(), row_version: version }); }
                }>"Delete rollout"</button>
            })}
        </article>
    }
}
