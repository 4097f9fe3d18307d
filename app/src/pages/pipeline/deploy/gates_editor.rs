//! A stage's gates: one checkbox each, and a gate's settings right under it while it is on.

use leptos::prelude::*;

use super::field_errors::{CheckedPlan, Field};
use super::plan_model::{GateEdit, GateKind, GatesDraft};

const COMPARATORS: [(&str, &str); 4] = [
    ("lt", "lt (less than)"),
    ("lte", "lte (at most)"),
    ("gt", "gt (greater than)"),
    ("gte", "gte (at least)"),
];

#[component]
pub fn GatesEditor(
    gates: Memo<GatesDraft>,
    edit: Callback<GateEdit>,
    /// The plan's errors, and this stage's place in the plan.
    checked: Memo<CheckedPlan>,
    index: Memo<usize>,
    prometheus: Memo<bool>,
    /// Makes element ids unique on the page.
    id_prefix: String,
) -> impl IntoView {
    let on = move |kind: GateKind| Memo::new(move |_| gates.with(|g| g.is_on(kind)));
    let (error_rate, throughput, promql) = (
        on(GateKind::ErrorRate),
        on(GateKind::ThroughputDrop),
        on(GateKind::PromQl),
    );
    let error = move |field: Field| checked.with(|c| c.errors.at(Some(index.get()), field));
    let field_error = move |field: Field, id: String| {
        move || error(field).map(|m| view! { <p class="field-error" id=id.clone()>{m}</p> })
    };
    let toggle = move |kind: GateKind, label: &'static str| {
        view! {
            <label class="check">
                <input type="checkbox" prop:checked=move || gates.with(|g| g.is_on(kind))
                    on:change=move |ev| edit.run(GateEdit::Toggle(kind, event_target_checked(&ev)))/>
                {label}
            </label>
        }
    };
    let number = move |label: &'static str,
                       field: Field,
                       id: String,
                       read: fn(&GatesDraft) -> String,
                       write: fn(String) -> GateEdit| {
        view! {
            <label>{label}
                <input type="number" step="any" class="short"
                    prop:value=move || gates.with(read)
                    on:input=move |ev| edit.run(write(event_target_value(&ev)))
                    aria-invalid=move || error(field).is_some().to_string()
                    aria-describedby=id.clone()/>
            </label>
            {field_error(field, id)}
        }
    };
    let p = id_prefix;
    let ids = |suffix: &str| format!("{p}-{suffix}-error");
    let (err_id, drop_id, query_id, cmp_id, threshold_id) = (
        ids("max-error"),
        ids("max-drop"),
        ids("query"),
        ids("comparator"),
        ids("threshold"),
    );
    let promql_block = move || {
        let (query_id, cmp_id, threshold_id) =
            (query_id.clone(), cmp_id.clone(), threshold_id.clone());
        prometheus.get().then(move || view! {
            <div class="gate">
                {toggle(GateKind::PromQl, "PromQL")}
                {move || {
                    let (query_id, cmp_id, threshold_id) = (query_id.clone(), cmp_id.clone(), threshold_id.clone());
                    promql.get().then(move || view! {
                        <div class="gate-settings">
                            <label>"Query"
                                <input type="text" class="mono" spellcheck="false" placeholder="sum(rate(vector_component_errors_total[5m]))"
                                    prop:value=move || gates.with(|g| g.query.clone())
                                    on:input=move |ev| edit.run(GateEdit::Query(event_target_value(&ev)))
                                    aria-invalid=move || error(Field::Query).is_some().to_string()
                                    aria-describedby=query_id.clone()/>
                            </label>
                            {field_error(Field::Query, query_id.clone())}
                            <div class="inline-fields">
                                <label>"Comparator"
                                    <select on:change=move |ev| edit.run(GateEdit::Comparator(event_target_value(&ev)))
                                        aria-describedby=cmp_id.clone()>
                                        {COMPARATORS.into_iter().map(|(value, text)| view! {
                                            <option value=value selected=move || gates.with(|g| g.comparator == value)>{text}</option>
                                        }).collect_view()}
                                    </select>
                                </label>
                                {number("Threshold", Field::Threshold, threshold_id.clone(), |g| g.threshold.clone(), GateEdit::Threshold)}
                            </div>
                            {field_error(Field::Comparator, cmp_id.clone())}
                            <p class="hint">"Passes when the query's single number compares to the threshold as chosen; an error, timeout, empty or multi-sample result fails the gate."</p>
                        </div>
                    })
                }}
            </div>
        })
    };
    view! {
        <fieldset class="gates">
            <legend>"Gates"</legend>
            <div class="gate">
                {toggle(GateKind::HealthWindow, "Health window")}
                <span class="hint">"Passes once the bake time has elapsed."</span>
            </div>
            <div class="gate">
                {toggle(GateKind::ErrorRate, "Error rate")}
                {move || {
                    let id = err_id.clone();
                    error_rate.get().then(move || view! {
                        <div class="gate-settings">
                            {number("Max error %", Field::MaxErrorPercent, id, |g| g.max_error_percent.clone(), GateEdit::MaxErrorPercent)}
                        </div>
                    })
                }}
            </div>
            <div class="gate">
                {toggle(GateKind::ThroughputDrop, "Throughput drop")}
                {move || {
                    let id = drop_id.clone();
                    throughput.get().then(move || view! {
                        <div class="gate-settings">
                            {number("Max drop %", Field::MaxDropPercent, id, |g| g.max_drop_percent.clone(), GateEdit::MaxDropPercent)}
                        </div>
                    })
                }}
            </div>
            {promql_block}
            {move || error(Field::Gates).map(|m| view! { <p class="field-error">{m}</p> })}
        </fieldset>
    }
}
