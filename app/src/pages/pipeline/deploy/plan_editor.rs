//! The progressive rollout plan: its stages, the two toggles, the offline policy, and what
//! the gates mean.

use leptos::prelude::*;

use super::field_errors::{CheckedPlan, Field};
use super::plan_model::{PlanDraft, PlanEdit, MAX_STAGES};
use super::preview_view::FleetSummary;
use super::stage_editor::StageEditor;
use super::{DeployContext, Preview};
use crate::preview::StagePreview;
use vf_rules::OfflinePolicy;

#[component]
pub fn PlanEditor(
    plan: RwSignal<PlanDraft>,
    checked: Memo<CheckedPlan>,
    previews: Memo<Option<Vec<StagePreview>>>,
    preview: RwSignal<Preview>,
    context: RwSignal<Option<DeployContext>>,
) -> impl IntoView {
    let prometheus = Memo::new(move |_| context.with(|c| c.as_ref().is_some_and(|c| c.prometheus)));
    let error = move |field: Field| checked.with(|c| c.errors.at(None, field));
    let toggle = move |label: &'static str,
                       field: Field,
                       read: fn(&PlanDraft) -> bool,
                       write: fn(bool) -> PlanEdit,
                       hint: &'static str| {
        view! {
            <div class="toggle">
                <label class="check">
                    <input type="checkbox" prop:checked=move || plan.with(read)
                        on:change=move |ev| plan.update(|p| p.apply(write(event_target_checked(&ev))))/>
                    {label}
                </label>
                <span class="hint">{hint}</span>
                {move || error(field).map(|m| view! { <p class="field-error">{m}</p> })}
            </div>
        }
    };
    view! {
        <fieldset class="plan-editor">
            <legend>"Rollout plan"</legend>
            <p class="hint">
                "Stages are cumulative: each one adds nodes to those of the stages before it, bakes, "
                "then every gate it has must pass. A stage's nodes are fixed when it starts."
            </p>
            <p class="hint">
                "OpenTelemetry collector nodes report no event counters, so the Error rate gate fails closed for them: "
                "for stages that include collectors, use a PromQL gate instead."
                {move || (!prometheus.get()).then_some(
                    " PromQL gates need VF_PROMETHEUS_URL, which this server does not have, so they are not offered.",
                )}
            </p>
            <FleetSummary preview/>
            {move || error(Field::Other).map(|m| view! { <p class="field-error">{m}</p> })}
            <For each=move || plan.with(PlanDraft::keys) key=|k| *k let:key>
                <StageEditor plan key checked previews context prometheus/>
            </For>
            <div class="plan-actions">
                <button type="button" id="add-stage"
                    disabled=move || !plan.with(PlanDraft::can_add)
                    on:click=move |_| plan.update(|p| p.apply(PlanEdit::AddStage))>
                    "Add stage"
                </button>
                <span class="hint">{move || format!("{} of at most {MAX_STAGES} stages", plan.with(|p| p.stages.len()))}</span>
            </div>
            {move || error(Field::Stages).map(|m| view! { <p class="field-error">{m}</p> })}
            <div class="toggles">
                {toggle("Auto-advance", Field::AutoAdvance, |p| p.auto_advance, PlanEdit::AutoAdvance,
                    "Off: after each passing stage the release holds until an operator advances it.")}
                {toggle("Auto-rollback on gate failure", Field::AutoRollback, |p| p.auto_rollback_on_gate_fail, PlanEdit::AutoRollback,
                    "Off: a failing gate holds the release for an operator instead of rolling it back.")}
            </div>
            <div class="field">
                <label for="offline-nodes">"Offline nodes"</label>
                <select id="offline-nodes"
                    prop:value=move || plan.with(|p| p.offline_nodes.map_or("", OfflinePolicy::as_str))
                    on:change=move |ev| {
                        let policy = OfflinePolicy::parse(&event_target_value(&ev));
                        plan.update(|p| p.apply(PlanEdit::OfflineNodes(policy)));
                    }>
                    <option value="">"Server default (exclude, unless VF_OFFLINE_NODES_DEFAULT says)"</option>
                    <option value="exclude">"Exclude them (up to 10% of a stage)"</option>
                    <option value="wait">"Wait for them"</option>
                    <option value="fail">"Fail the stage"</option>
                </select>
                <span class="hint">
                    "A targeted node silent for 3 of its poll intervals is offline. Exclude: it leaves proof of apply and the gates, named in the evidence. "
                    "Wait: the stage holds until it reports. Revoked nodes always leave the counts."
                </span>
                {move || error(Field::OfflineNodes).map(|m| view! { <p class="field-error">{m}</p> })}
            </div>
        </fieldset>
    }
}
