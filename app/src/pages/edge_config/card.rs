//! One rollout's card: its global percent (slider and number, previewed live), its org
//! overrides, the confirmation panel every change waits in, and apart from all of them the
//! danger zone where it is deleted.

use leptos::prelude::*;

use super::confirm::{ConfirmPanel, PercentField};
use super::model::{percent_input, Pending};
use super::EdgeActions;
use crate::api::edge::DeleteRollout;
use crate::components::Table;
use crate::types::{format_time, preview_change, RollingView};

#[component]
pub fn RolloutCard(r: RollingView, actions: EdgeActions, editable: bool) -> impl IntoView {
    let saved = r.global.percent;
    let name = StoredValue::new(r.name.clone());
    let orgs = StoredValue::new(r.orgs.clone());
    let version = r.row_version;
    let retired = r.retired_at.is_some();
    let pending = RwSignal::new(None::<Pending>);
    // While a change waits for confirmation, the fields that made it stay as they were.
    let waiting = Signal::derive(move || pending.with(Option::is_some));
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
            {editable.then(|| view! { <GlobalPercent name saved version orgs pending waiting/> })}
            <h3>"Org overrides"</h3>
            <Table rows=r.orgs.clone() class="grid compact"
                columns=&["Org", "Percent", "Previous", "Changed"] actions=true let((org, e))>
                {
                    let org_name = StoredValue::new(org.clone());
                    let remove = move |_| pending.set(Some(Pending::RemoveOrg {
                        rollout: name.get_value(),
                        row_version: version,
                        org: org_name.get_value(),
                        from: e.percent,
                        global: saved,
                    }));
                    view! {
                        <tr data-org=org.clone()>
                            <th scope="row">{org.clone()}</th>
                            <td>{format!("{}%", e.percent)}</td>
                            <td>{format!("{}%", e.previous_percent)}</td>
                            <td>{format_time(e.changed_at)}</td>
                            <td>{editable.then(|| view! {
                                <button type="button" class="danger small" on:click=remove
                                    disabled=move || waiting.get()>"Remove"</button>
                            })}</td>
                        </tr>
                    }
                }
            </Table>
            {editable.then(|| view! { <SetOverride name saved version orgs pending waiting/> })}
            {editable.then(|| view! { <ConfirmPanel pending actions id=format!("confirm-{}", name.get_value())/> })}
            {(editable && !retired).then(|| view! { <DangerZone name version actions/> })}
        </article>
    }
}

/// The global percent: a slider and a number kept in step, the live preview of what moves,
/// and Save, which only opens the confirmation.
#[component]
fn GlobalPercent(
    name: StoredValue<String>,
    saved: u8,
    version: i64,
    orgs: StoredValue<Vec<(String, vf_rolling::RolloutEntry)>>,
    pending: RwSignal<Option<Pending>>,
    waiting: Signal<bool>,
) -> impl IntoView {
    let text = RwSignal::new(saved.to_string());
    let draft = Memo::new(move |_| text.with(|t| percent_input(t)));
    let changed = move || draft.with(|d| d.as_ref().is_ok_and(|p| p.get() != saved));
    let save = move |_| {
        let Ok(to) = draft.get_untracked() else {
            return;
        };
        pending.set(Some(Pending::Global {
            rollout: name.get_value(),
            row_version: version,
            from: saved,
            to,
            overrides: orgs
                .with_value(|o| o.iter().map(|(org, e)| (org.clone(), e.percent)).collect()),
        }));
    };
    let field_id = format!("global-{}", name.get_value());
    view! {
        <div class="form inline">
            <label>"Global percent"
                <input type="range" min="0" max="100" step="1"
                    // An invalid number leaves the slider where the saved percent is.
                    prop:value=move || draft.with(|d| d.as_ref().map_or(saved, |p| p.get())).to_string()
                    on:input=move |ev| text.set(event_target_value(&ev))
                    prop:disabled=move || waiting.get()/>
            </label>
            <PercentField text label="Global percent number" id=field_id disabled=waiting/>
            <button type="button" on:click=save disabled=move || !changed() || waiting.get()>"Save"</button>
        </div>
        <p class="muted small" data-testid="percent-preview">
            {move || draft.with(|d| d.as_ref().ok().filter(|p| p.get() != saved).map(|p| preview_change(saved, p.get())))}
        </p>
    }
}

/// A new or changed org override; like Save, it only opens the confirmation.
#[component]
fn SetOverride(
    name: StoredValue<String>,
    saved: u8,
    version: i64,
    orgs: StoredValue<Vec<(String, vf_rolling::RolloutEntry)>>,
    pending: RwSignal<Option<Pending>>,
    waiting: Signal<bool>,
) -> impl IntoView {
    let org = RwSignal::new(String::new());
    let text = RwSignal::new("0".to_string());
    let ready =
        move || !org.with(|o| o.trim().is_empty()) && text.with(|t| percent_input(t).is_ok());
    let set = move |_| {
        let Ok(to) = text.with_untracked(|t| percent_input(t)) else {
            return;
        };
        let org = org.get_untracked().trim().to_owned();
        let from = orgs.with_value(|o| o.iter().find(|(o, _)| *o == org).map(|(_, e)| e.percent));
        pending.set(Some(Pending::SetOrg {
            rollout: name.get_value(),
            row_version: version,
            org,
            from,
            global: saved,
            to,
        }));
    };
    let field_id = format!("org-percent-{}", name.get_value());
    view! {
        <div class="form inline">
            <label>"Org" <input bind:value=org placeholder="org_1" prop:disabled=move || waiting.get()/></label>
            <PercentField text label="Percent" visible_label=true id=field_id disabled=waiting/>
            <button type="button" on:click=set disabled=move || !ready() || waiting.get()>"Set override"</button>
        </div>
    }
}

/// Deleting, apart from everything else: the rollout's name typed exactly enables the button.
#[component]
fn DangerZone(name: StoredValue<String>, version: i64, actions: EdgeActions) -> impl IntoView {
    let typed = RwSignal::new(String::new());
    let matches = move || typed.with(|t| *t == name.get_value());
    let delete = move |_| {
        if !matches() {
            return;
        }
        actions.delete.dispatch(DeleteRollout {
            name: name.get_value(),
            row_version: version,
            confirm_name: typed.get_untracked(),
        });
    };
    view! {
        <section class="danger-zone" aria-label="Danger zone">
            <h3>"Danger zone"</h3>
            <p class="muted small">
                "Deleting sends every customer back to the old path, org overrides included. The rollout stays in the published document at 0% so caches see who moved; setting a percent again revives it."
            </p>
            <div class="form inline">
                <label>{format!("Type {} to confirm", name.get_value())}
                    <input bind:value=typed autocomplete="off" spellcheck="false"/>
                </label>
                <button type="button" class="danger" on:click=delete disabled=move || !matches()>
                    "Delete rollout"
                </button>
            </div>
        </section>
    }
}
