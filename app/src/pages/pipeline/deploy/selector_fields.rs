//! The selector controls shared by a rollout stage and a plan-less canary: a kind, then the
//! one input that kind needs, with its error right below it. Selects get a `<label for>`
//! rather than a wrapping label, so their accessible name is the label alone, not the
//! label plus every option's text.

use leptos::prelude::*;

use super::plan_model::{SelectorDraft, SelectorEdit, SelectorKind};
use crate::preview::GroupRef;

#[component]
pub fn SelectorFields(
    value: Signal<SelectorDraft>,
    edit: Callback<SelectorEdit>,
    /// The kinds offered, in order (a plan-less canary has no node groups).
    kinds: Vec<SelectorKind>,
    groups: Signal<Vec<GroupRef>>,
    error: Signal<Option<String>>,
    /// Makes element ids unique on the page.
    id_prefix: String,
) -> impl IntoView {
    let kind = Memo::new(move |_| value.with(|v| v.kind));
    let kind_id = format!("{id_prefix}-selector");
    let group_id = format!("{id_prefix}-node-group");
    let error_id = format!("{id_prefix}-selector-error");
    let described = error_id.clone();
    let invalid = move || error.with(Option::is_some).to_string();
    let input = move || {
        let described = described.clone();
        match kind.get() {
            SelectorKind::Labels => view! {
                <label>"Labels"
                    <input type="text" placeholder="rollout-wave=0, region=eu" autocomplete="off"
                        prop:value=move || value.with(|v| v.labels.clone())
                        on:input=move |ev| edit.run(SelectorEdit::Labels(event_target_value(&ev)))
                        aria-invalid=invalid aria-describedby=described/>
                </label>
            }
            .into_any(),
            SelectorKind::Percentage => view! {
                <label>"Percentage"
                    <input type="number" min="0.01" max="100" step="any" inputmode="decimal" class="short"
                        prop:value=move || value.with(|v| v.percentage.clone())
                        on:input=move |ev| edit.run(SelectorEdit::Percentage(event_target_value(&ev)))
                        aria-invalid=invalid aria-describedby=described/>
                </label>
            }
            .into_any(),
            SelectorKind::NodeGroup => view! {
                <div class="field">
                    <label for=group_id.clone()>"Node group"</label>
                    <select id=group_id.clone()
                        on:change=move |ev| edit.run(SelectorEdit::NodeGroup(event_target_value(&ev)))
                        aria-invalid=invalid aria-describedby=described>
                        <option value="" disabled selected=move || value.with(|v| v.node_group.is_empty())>
                            {move || if groups.with(Vec::is_empty) { "No node groups in this environment" } else { "Choose a group" }}
                        </option>
                        <For each=move || groups.get() key=|g| g.id.clone() let:g>
                            {group_option(g, value)}
                        </For>
                    </select>
                </div>
            }
            .into_any(),
        }
    };
    view! {
        <div class="selector-fields">
            <div class="field">
                <label for=kind_id.clone()>"Selector"</label>
                <select id=kind_id on:change=move |ev| {
                    if let Some(k) = SelectorKind::from_value(&event_target_value(&ev)) {
                        edit.run(SelectorEdit::Kind(k));
                    }
                }>
                    {kinds.into_iter().map(|k| view! {
                        <option value=k.value() selected=move || kind.get() == k>{k.label()}</option>
                    }).collect_view()}
                </select>
            </div>
            {input}
        </div>
        {move || error.get().map(|m| view! { <p class="field-error" id=error_id.clone()>{m}</p> })}
    }
}

/// `Name (k=v, ...)`, so the operator sees what the group matches.
fn group_option(g: GroupRef, value: Signal<SelectorDraft>) -> impl IntoView {
    let chosen = g.id.clone();
    let criteria = crate::types::label_text(&g.criteria);
    let criteria = if criteria.is_empty() {
        "every node".to_owned()
    } else {
        criteria
    };
    view! {
        <option value=g.id selected=move || value.with(|v| v.node_group == chosen)>
            {format!("{} ({criteria})", g.name)}
        </option>
    }
}
