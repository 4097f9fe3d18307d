//! A stage's gates: one checkbox each, and a gate's settings right under it while it is on.

use leptos::prelude::*;

use super::field_errors::{CheckedPlan, Field};
use super::plan_model::{GateEdit, GateKind, GatesDraft};
use crate::api::releases::TestPromql;

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
    /// PromQL is offered only when the server has Prometheus.
    prometheus: Memo<bool>,
    /// Makes element ids unique on the page.
    id_prefix: String,
) -> impl IntoView {
    let prefix = StoredValue::new(id_prefix);
    let test = ServerAction::<TestPromql>::new();
    let id = move |suffix: &str| prefix.with_value(|p| format!("{p}-{suffix}"));
    let on = move |kind: GateKind| Memo::new(move |_| gates.with(|g| g.is_on(kind)));
    let (error_rate, throughput, promql) = (
        on(GateKind::ErrorRate),
        on(GateKind::ThroughputDrop),
        on(GateKind::PromQl),
    );
    let error = move |field: Field| checked.with(|c| c.errors.at(Some(index.get()), field));
    let field_error = move |field: Field, error_id: String| {
        move || error(field).map(|m| view! { <p class="field-error" id=error_id.clone()>{m}</p> })
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
                       suffix: &str,
                       read: fn(&GatesDraft) -> String,
                       write: fn(String) -> GateEdit| {
        let error_id = id(&format!("{suffix}-error"));
        view! {
            <label>{label}
                <input type="number" step="any" class="short"
                    prop:value=move || gates.with(read)
                    on:input=move |ev| edit.run(write(event_target_value(&ev)))
                    aria-invalid=move || error(field).is_some().to_string()
                    aria-describedby=error_id.clone()/>
            </label>
            {field_error(field, error_id)}
        }
    };
    let promql_settings = move || {
        view! {
            <div class="gate-settings">
                <label>"Query"
                    <input type="text" class="mono" spellcheck="false" autocomplete="off"
                        placeholder="sum(rate(vector_component_errors_total[5m]))"
                        prop:value=move || gates.with(|g| g.query.clone())
                        on:input=move |ev| edit.run(GateEdit::Query(event_target_value(&ev)))
                        aria-invalid=move || error(Field::Query).is_some().to_string()
                        aria-describedby=id("query-error")/>
                </label>
                {field_error(Field::Query, id("query-error"))}
                <div class="inline-fields">
                    <div class="field">
                        <label for=id("comparator")>"Comparator"</label>
                        <select id=id("comparator") aria-describedby=id("comparator-error")
                            on:change=move |ev| edit.run(GateEdit::Comparator(event_target_value(&ev)))>
                            {COMPARATORS.into_iter().map(|(value, text)| view! {
                                <option value=value selected=move || gates.with(|g| g.comparator == value)>{text}</option>
                            }).collect_view()}
                        </select>
                    </div>
                    {number("Threshold", Field::Threshold, "threshold", |g| g.threshold.clone(), GateEdit::Threshold)}
                </div>
                {field_error(Field::Comparator, id("comparator-error"))}
                <div class="inline-fields">
                    <button type="button" disabled=move || test.pending().get()
                        on:click=move |_| {
                            let (query, comparator, threshold) = gates.with(|g| {
                                (g.query.clone(), g.comparator.clone(), g.threshold.trim().parse::<f64>().ok())
                            });
                            test.dispatch(TestPromql { query, comparator, threshold });
                        }>"Test query"</button>
                    <span class="hint" data-testid="promql-test" aria-live="polite">
                        {move || test.value().get().map(|r| match r {
                            Ok(t) => {
                                let verdict = match t.passes {
                                    Some(true) => "passes now: ",
                                    Some(false) => "fails now: ",
                                    None => "",
                                };
                                format!("{verdict}{}", t.text)
                            }
                            Err(e) => crate::api::error_text(&e),
                        })}
                    </span>
                </div>
                <p class="hint">
                    "Passes when the query's single number compares to the threshold as chosen. "
                    "A plan whose query does not give one number now is refused when it starts; "
                    "during the bake an empty result is no data and an error is an error, "
                    "both failing closed at the deadline unless the gate's onNoData says hold."
                </p>
            </div>
        }
    };
    view! {
        <fieldset class="gates-editor">
            <legend>"Gates"</legend>
            <div class="gate">
                {toggle(GateKind::HealthWindow, "Health window")}
                <span class="hint">"Passes once the bake time has elapsed."</span>
            </div>
            <div class="gate">
                {toggle(GateKind::ErrorRate, "Error rate")}
                {move || error_rate.get().then(|| view! {
                    <div class="gate-settings">
                        {number("Max error %", Field::MaxErrorPercent, "max-error", |g| g.max_error_percent.clone(), GateEdit::MaxErrorPercent)}
                    </div>
                })}
            </div>
            <div class="gate">
                {toggle(GateKind::ThroughputDrop, "Throughput drop")}
                {move || throughput.get().then(|| view! {
                    <div class="gate-settings">
                        {number("Max drop %", Field::MaxDropPercent, "max-drop", |g| g.max_drop_percent.clone(), GateEdit::MaxDropPercent)}
                    </div>
                })}
            </div>
            {move || prometheus.get().then(|| view! {
                <div class="gate">
                    {toggle(GateKind::PromQl, "PromQL")}
                    {move || promql.get().then(promql_settings)}
                </div>
            })}
            {move || error(Field::Gates).map(|m| view! { <p class="field-error">{m}</p> })}
        </fieldset>
    }
}
