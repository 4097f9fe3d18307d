//! Gate results recorded at each evaluation, with their evidence.

use leptos::prelude::*;

use crate::components::StatusBadge;
use crate::types::{format_time, EvaluationView};

/// An observed value or threshold of a result, as the live checks write them.
fn number(gate: &str, v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| super::checks::value_text_of(gate, v))
}

#[component]
pub fn GateEvaluations(evaluations: Vec<EvaluationView>) -> impl IntoView {
    if evaluations.is_empty() {
        return ().into_any();
    }
    view! {
        <div class="evaluations">
            {evaluations.into_iter().map(|e| view! {
                <div class="evaluation" data-decision=e.decision.as_str()>
                    <p class="small">
                        <strong>{format!("Gates evaluated by {} ({})", e.actor, e.trigger.as_str())}</strong>
                        " at " {format_time(e.at)} " - " <span class="decision">{e.decision.as_str()}</span>
                    </p>
                    <table class="grid compact gates">
                        <thead><tr>
                            <th scope="col">"Gate"</th><th scope="col">"Verdict"</th><th scope="col">"Observed"</th>
                            <th scope="col">"Threshold"</th><th scope="col">"Evidence"</th>
                        </tr></thead>
                        <tbody>
                            {e.results.into_iter().map(|g| {
                                let verdict = format!("{:?}", g.verdict).to_uppercase();
                                // The badge reads "Pass", "Fail", ...; data-verdict keeps the code.
                                let verdict_attr = verdict.clone();
                                view! {
                                    <tr data-gate=g.gate.clone() data-verdict=verdict_attr>
                                        <th scope="row">{g.gate.clone()}</th>
                                        <td><StatusBadge status=verdict/></td>
                                        <td class="num">{number(&g.gate, g.observed)}</td>
                                        <td class="num">{number(&g.gate, g.threshold)}</td>
                                        <td>
                                            {g.query.clone().map(|q| view! { <code class="query">{q}</code>" " })}
                                            {g.reason.clone()}
                                        </td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            }).collect_view()}
        </div>
    }
    .into_any()
}
