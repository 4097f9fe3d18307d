//! The plan-less canary: one selector and a health-check window, then a manual broaden.

use leptos::prelude::*;

use super::canary_model::{CanaryDraft, CanaryEdit};
use super::field_errors::{Field, FieldErrors};
use super::plan_model::SelectorKind;
use super::preview_view::{FleetSummary, StagePreviewLine};
use super::selector_fields::SelectorFields;
use super::Preview;
use crate::preview::StagePreview;

#[component]
pub fn CanaryFields(
    canary: RwSignal<CanaryDraft>,
    errors: Memo<FieldErrors>,
    previews: Memo<Option<Vec<StagePreview>>>,
    preview: RwSignal<Preview>,
) -> impl IntoView {
    let edit = move |e: CanaryEdit| canary.update(|c| c.apply(e));
    let selector = Signal::derive(move || canary.with(|c| c.selector.clone()));
    let selector_error = Signal::derive(move || errors.with(|e| e.at(None, Field::Selector)));
    let window_error = Memo::new(move |_| errors.with(|e| e.at(None, Field::Window)));
    view! {
        <fieldset class="canary-settings">
            <legend>"Canary settings"</legend>
            <SelectorFields value=selector
                edit=Callback::new(move |e| edit(CanaryEdit::Selector(e)))
                kinds=vec![SelectorKind::Percentage, SelectorKind::Labels]
                groups=Signal::derive(Vec::new)
                error=selector_error
                id_prefix="canary".to_owned()/>
            <label>"Health-check window (minutes)"
                <input type="number" min="1" max="1440" step="1" class="short"
                    prop:value=move || canary.with(|c| c.window_minutes.clone())
                    on:input=move |ev| edit(CanaryEdit::WindowMinutes(event_target_value(&ev)))
                    aria-invalid=move || window_error.with(Option::is_some).to_string()
                    aria-describedby="canary-window-error"/>
            </label>
            {move || window_error.get().map(|m| view! { <p class="field-error" id="canary-window-error">{m}</p> })}
            <p class="hint">
                "The canary version goes only to the selected nodes; every other node keeps the deployed version. "
                "After the health-check window the release holds in HEALTH_CHECK: nothing widens on its own. "
                "Broaden it to every node, or roll it back, from the rollout view on this page."
            </p>
            <StagePreviewLine preview=Signal::derive(move || super::stage_preview(previews, 0))
                testid="canary-preview"/>
            <FleetSummary preview/>
        </fieldset>
    }
}
