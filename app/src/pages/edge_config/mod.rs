//! `/admin/edge-config`: rolling rollouts by customer bucket. One card per rollout with its
//! percent (slider and number, previewed live), previous percent and when it changed, org
//! overrides and a danger zone; a bucket lookup, the change history and the published
//! document. No change is saved before its routing preview is confirmed, with an optional
//! comment the history shows.

mod card;
mod confirm;
mod model;

use crate::components::load;
use leptos::prelude::*;

use crate::api::edge::{edge_admin, DeleteRollout, RemoveOrgOverride, SetRolloutPercent};
use crate::api::error_text;
use crate::components::{use_session, ErrorBox, Loaded, Table};
use crate::types::{format_time, EdgeAdminView, RollingView};
use card::RolloutCard;
use confirm::{ConfirmPanel, PercentField};
use model::{history_line, percent_input, Pending};

/// The page's three writes; every change is one of them.
#[derive(Clone, Copy)]
pub struct EdgeActions {
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
    let data = load(
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
                columns=&["When", "Rollout", "Change"] empty="No changes yet." let:h>
                <tr>
                    <td class="nowrap">{format_time(h.at)}</td>
                    <th scope="row">{h.rollout.clone()}</th>
                    <td>{history_line(&h)}</td>
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

/// A new rollout: its name and first percent, confirmed like every change.
#[component]
fn NewRollout(actions: EdgeActions) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let percent = RwSignal::new("0".to_string());
    let pending = RwSignal::new(None::<Pending>);
    let waiting = Signal::derive(move || pending.with(Option::is_some));
    let ready =
        move || !name.with(|n| n.trim().is_empty()) && percent.with(|p| percent_input(p).is_ok());
    let create = move |_| {
        let Ok(p) = percent.with_untracked(|p| percent_input(p)) else {
            return;
        };
        pending.set(Some(Pending::Create {
            rollout: name.get_untracked().trim().to_owned(),
            percent: p,
        }));
    };
    view! {
        <section class="card" aria-label="New rollout">
            <div class="form inline">
                <label>"New rollout name"
                    <input bind:value=name placeholder="v2-cache" prop:disabled=move || waiting.get()/>
                </label>
                <PercentField text=percent label="Percent" visible_label=true id={"new-rollout-percent".to_owned()} disabled=waiting/>
                <button type="button" on:click=create disabled=move || !ready() || waiting.get()>"Create rollout"</button>
            </div>
            <ConfirmPanel pending actions id={"confirm-new-rollout".to_owned()}/>
        </section>
    }
}
