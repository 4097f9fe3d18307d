//! One stage of the plan: who joins, how long they bake, which gates must pass, and the
//! nodes it would add. Controls are keyed by the stage's stable key, labels by its place.

use leptos::prelude::*;

use super::field_errors::{CheckedPlan, Field};
use super::focus::focus_later;
use super::gates_editor::GatesEditor;
use super::plan_model::{BakeUnit, PlanDraft, PlanEdit, SelectorKind, StageEdit};
use super::preview_view::StagePreviewLine;
use super::selector_fields::SelectorFields;
use super::DeployContext;
use crate::preview::StagePreview;

#[component]
pub fn StageEditor(
    plan: RwSignal<PlanDraft>,
    key: u32,
    checked: Memo<CheckedPlan>,
    previews: Memo<Option<Vec<StagePreview>>>,
    context: RwSignal<Option<DeployContext>>,
    prometheus: Memo<bool>,
) -> impl IntoView {
    let index = Memo::new(move |_| plan.with(|p| p.index_of(key).unwrap_or(0)));
    let count = Memo::new(move |_| plan.with(|p| p.stages.len()));
    let stage = Memo::new(move |_| plan.with(|p| p.stage(key).cloned()));
    let number = move || index.get() + 1;
    // Comparisons live outside `view!`, whose attribute parser would read `>` as a tag end.
    let is_last = Memo::new(move |_| index.get() + 1 >= count.get());
    let is_only = Memo::new(move |_| count.get() <= 1);
    let edit = move |e: StageEdit| plan.update(|p| p.apply(PlanEdit::Stage(key, e)));
    let error = move |field: Field| checked.with(|c| c.errors.at(Some(index.get()), field));
    let bake_error = Memo::new(move |_| error(Field::Bake));
    let up_id = format!("stage-{key}-up");
    let down_id = format!("stage-{key}-down");
    let (up_ids, down_ids) = (
        vec![up_id.clone(), down_id.clone()],
        vec![down_id.clone(), up_id.clone()],
    );
    let bake_error_id = format!("stage-{key}-bake-error");
    let unit_id = format!("stage-{key}-unit");
    let described = bake_error_id.clone();

    let selector = Signal::derive(move || {
        stage
            .with(|s| s.as_ref().map(|s| s.selector.clone()))
            .unwrap_or_else(|| super::plan_model::SelectorDraft::percentage(""))
    });
    let gates =
        Memo::new(move |_| stage.with(|s| s.as_ref().map(|s| s.gates.clone()).unwrap_or_default()));
    let groups = Signal::derive(move || {
        context.with(|c| c.as_ref().map(|c| c.groups.clone()).unwrap_or_default())
    });
    let bake_unit =
        Memo::new(move |_| stage.with(|s| s.as_ref().map_or(BakeUnit::Minutes, |s| s.bake_unit)));

    view! {
        <fieldset class="stage-editor" data-stage=number>
            <legend>{move || format!("Stage {}", number())}</legend>
            <div class="stage-tools">
                <button type="button" class="small" id=up_id
                    aria-label=move || format!("Move stage {} up", number())
                    disabled=move || index.get() == 0
                    on:click=move |_| { plan.update(|p| p.apply(PlanEdit::MoveUp(key))); focus_later(up_ids.clone()); }>
                    "Up"
                </button>
                <button type="button" class="small" id=down_id
                    aria-label=move || format!("Move stage {} down", number())
                    disabled=move || is_last.get()
                    on:click=move |_| { plan.update(|p| p.apply(PlanEdit::MoveDown(key))); focus_later(down_ids.clone()); }>
                    "Down"
                </button>
                <button type="button" class="small danger"
                    aria-label=move || format!("Remove stage {}", number())
                    disabled=move || is_only.get()
                    on:click=move |_| { plan.update(|p| p.apply(PlanEdit::Remove(key))); focus_later(vec!["add-stage".into()]); }>
                    "Remove"
                </button>
            </div>
            <div class="stage-grid">
                <div class="stage-col">
                    <SelectorFields value=selector
                        edit=Callback::new(move |e| edit(StageEdit::Selector(e)))
                        kinds=vec![SelectorKind::Percentage, SelectorKind::Labels, SelectorKind::NodeGroup]
                        groups
                        error=Signal::derive(move || error(Field::Selector))
                        id_prefix=format!("stage-{key}")/>
                    <div class="inline-fields">
                        <label>"Bake time"
                            <input type="number" min="1" step="any" class="short"
                                prop:value=move || stage.with(|s| s.as_ref().map(|s| s.bake_amount.clone()).unwrap_or_default())
                                on:input=move |ev| edit(StageEdit::BakeAmount(event_target_value(&ev)))
                                aria-invalid=move || bake_error.with(Option::is_some).to_string()
                                aria-describedby=described/>
                        </label>
                        <div class="field">
                            <label for=unit_id.clone()>"Unit"</label>
                            <select id=unit_id on:change=move |ev| {
                                if let Some(u) = BakeUnit::from_label(&event_target_value(&ev)) {
                                    edit(StageEdit::BakeUnit(u));
                                }
                            }>
                                {BakeUnit::ALL.into_iter().map(|u| view! {
                                    <option value=u.label() selected=move || bake_unit.get() == u>{u.label()}</option>
                                }).collect_view()}
                            </select>
                        </div>
                    </div>
                    {move || bake_error.get().map(|m| view! { <p class="field-error" id=bake_error_id.clone()>{m}</p> })}
                    <p class="hint">"30 seconds to 24 hours. Gates are read when the bake ends."</p>
                </div>
                <div class="stage-col">
                    <GatesEditor gates
                        edit=Callback::new(move |e| edit(StageEdit::Gate(e)))
                        checked index prometheus
                        id_prefix=format!("stage-{key}")/>
                </div>
            </div>
            <StagePreviewLine
                preview=Signal::derive(move || super::stage_preview(previews, index.get()))
                testid=Signal::derive(move || format!("stage-preview-{}", number()))/>
        </fieldset>
    }
}
