//! The two inputs every routing change goes through: a percent field that refuses what is
//! not 0-100 next to itself, and the confirmation panel that shows a change's routing
//! preview and takes an optional comment before anything is saved.

use leptos::prelude::*;

use super::model::{percent_input, Pending};
use super::EdgeActions;
use crate::api::edge::{RemoveOrgOverride, SetRolloutPercent};

/// The most characters a comment may have (the server refuses more, naming `comment`).
const MAX_COMMENT_CHARS: usize = 500;

/// A percent field (`<input type="number">` labelled `label`) with its inline error: a value
/// outside 0-100 or not a whole number marks the field invalid and says why next to it.
#[component]
pub fn PercentField(
    text: RwSignal<String>,
    label: &'static str,
    /// Unique on the page: the error's element id is `{id}-error`.
    id: String,
    /// Shows `label` (otherwise it is the field's accessible name only).
    #[prop(optional)]
    visible_label: bool,
    #[prop(into)] disabled: Signal<bool>,
) -> impl IntoView {
    let error = move || text.with(|t| percent_input(t).err());
    let error_id = format!("{id}-error");
    let described = error_id.clone();
    view! {
        <div class="percent-field">
            <label>
                {visible_label.then_some(label)}
                <input type="number" min="0" max="100" step="1" inputmode="numeric" aria-label=label
                    prop:value=move || text.get()
                    on:input=move |ev| text.set(event_target_value(&ev))
                    prop:disabled=move || disabled.get()
                    aria-invalid=move || error().is_some().to_string()
                    aria-describedby=described/>
            </label>
            {move || error().map(|m| view! { <p class="field-error" id=error_id.clone()>{m}</p> })}
        </div>
    }
}

/// The change waiting for confirmation, if any: its routing preview, an optional comment,
/// and "Confirm save" / "Cancel". Nothing is saved until "Confirm save".
#[component]
pub fn ConfirmPanel(
    pending: RwSignal<Option<Pending>>,
    actions: EdgeActions,
    /// Unique on the page: prefixes the ids of the panel's elements.
    id: String,
) -> impl IntoView {
    let count_id = StoredValue::new(format!("{id}-comment-count"));
    let comment = RwSignal::new(String::new());
    let chars = move || comment.with(|c| c.trim().chars().count());
    let too_long = move || chars() > MAX_COMMENT_CHARS;
    let confirm = move |_| {
        let Some(change) = pending.get_untracked() else {
            return;
        };
        let text = comment.get_untracked();
        let note = crate::components::non_blank(&text);
        pending.set(None);
        comment.set(String::new());
        dispatch(actions, change, note);
    };
    let cancel = move |_| {
        pending.set(None);
        comment.set(String::new());
    };
    move || {
        pending.get().map(|change| {
            let lines = change.preview();
            view! {
                <section class="confirm-change" role="group" aria-label="Confirm routing change"
                    data-testid="confirm-change">
                    <h3>"Confirm routing change"</h3>
                    <ul class="plain routing-preview" data-testid="routing-preview">
                        {lines.into_iter().map(|l| view! { <li>{l}</li> }).collect_view()}
                    </ul>
                    <label>"Comment (optional)"
                        <textarea rows="2" placeholder="Why: ticket, load test, incident..."
                            prop:value=move || comment.get()
                            on:input=move |ev| comment.set(event_target_value(&ev))
                            aria-invalid=move || too_long().to_string()
                            aria-describedby=count_id.get_value()></textarea>
                    </label>
                    <p id=count_id.get_value() class=move || if too_long() { "field-error" } else { "muted small" }>
                        {move || format!("{} of {MAX_COMMENT_CHARS} characters", chars())}
                    </p>
                    <div class="actions">
                        <button type="button" class="primary" on:click=confirm disabled=too_long>
                            "Confirm save"
                        </button>
                        <button type="button" on:click=cancel>"Cancel"</button>
                    </div>
                </section>
            }
        })
    }
}

/// Sends a confirmed change with its comment.
fn dispatch(actions: EdgeActions, change: Pending, comment: Option<String>) {
    match change {
        Pending::Create { rollout, percent } => {
            actions.set.dispatch(SetRolloutPercent {
                name: rollout,
                org: None,
                percent: percent.get().into(),
                row_version: None,
                comment,
            });
        }
        Pending::Global {
            rollout,
            row_version,
            to,
            ..
        } => {
            actions.set.dispatch(SetRolloutPercent {
                name: rollout,
                org: None,
                percent: to.get().into(),
                row_version: Some(row_version),
                comment,
            });
        }
        Pending::SetOrg {
            rollout,
            row_version,
            org,
            to,
            ..
        } => {
            actions.set.dispatch(SetRolloutPercent {
                name: rollout,
                org: Some(org),
                percent: to.get().into(),
                row_version: Some(row_version),
                comment,
            });
        }
        Pending::RemoveOrg {
            rollout,
            row_version,
            org,
            ..
        } => {
            actions.remove.dispatch(RemoveOrgOverride {
                name: rollout,
                org,
                row_version,
                comment,
            });
        }
    }
}
