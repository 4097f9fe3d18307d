//! Gate verdicts, computed from inputs the caller already fetched (counters, rollups, a
//! Prometheus response), so the rules are testable without a database or a Prometheus.
//!
//! Every gate that cannot read its signal fails closed, except `throughputDrop` without a
//! baseline, which the SPEC skips. Each result carries its evidence (observed value,
//! threshold, query, a human reason) because the release records it and the rollout view
//! shows it. Reasons never contain credentials: they are built from the response body and
//! the caller's error text (with URL userinfo and bearer tokens masked, see
//! [`crate::promql`]), never from request headers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::{Comparator, Gate};
use crate::promql::{parse_promql_response, scrub};

/// A gate's outcome. `Skipped` counts as passing: the gate had nothing to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    Pass,
    Fail,
    Skipped,
}

/// One gate's verdict with the evidence recorded on the release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateResult {
    /// The gate's wire name: `healthWindow`, `errorRate`, `throughputDrop`, `customPromQL`.
    pub gate: String,
    pub verdict: Verdict,
    pub observed: Option<f64>,
    pub threshold: Option<f64>,
    pub query: Option<String>,
    pub reason: String,
}

impl GateResult {
    /// Pass or skipped.
    pub fn passed(&self) -> bool {
        self.verdict != Verdict::Fail
    }
}

/// Error and event counter deltas summed over the targeted nodes running the canary
/// version since the stage started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCounts {
    pub errors: i64,
    pub events_in: i64,
}

/// What happened to one PromQL instant query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromQlOutcome {
    Response { http_status: u16, body: String },
    Timeout,
    ConnectError(String),
    Other(String),
}

/// Everything a stage's gates read. `None` means "no data", which each gate treats as the
/// SPEC says. PromQL outcomes are keyed by query text since a stage may run several.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GateInputs {
    pub error_counts: Option<ErrorCounts>,
    /// Pipeline aggregate events/s over the 5 minutes before the rollout, captured at create.
    pub baseline_eps: Option<f64>,
    /// Pipeline aggregate events/s over the bake window; `None` when no rollups exist.
    pub current_eps: Option<f64>,
    pub promql: BTreeMap<String, PromQlOutcome>,
    /// Milliseconds of bake left. The scheduler evaluates at the deadline (0); an operator
    /// pressing "Advance" early evaluates with time left, and healthWindow then fails.
    pub bake_remaining_ms: i64,
}

/// The distinct PromQL queries a stage's gates need, in plan order: what the caller runs
/// (each bounded by its timeout) to fill [`GateInputs::promql`].
pub fn promql_queries(gates: &[Gate]) -> Vec<&str> {
    let mut queries: Vec<&str> = Vec::new();
    for gate in gates {
        if let Gate::CustomPromQl { query, .. } = gate {
            if !queries.contains(&query.as_str()) {
                queries.push(query);
            }
        }
    }
    queries
}

/// Every gate of a stage, in plan order.
pub fn evaluate_stage(gates: &[Gate], inputs: &GateInputs) -> Vec<GateResult> {
    gates.iter().map(|gate| evaluate(gate, inputs)).collect()
}

/// Whether a stage may proceed: no gate failed.
pub fn all_passed(results: &[GateResult]) -> bool {
    results.iter().all(GateResult::passed)
}

/// One gate.
pub fn evaluate(gate: &Gate, inputs: &GateInputs) -> GateResult {
    match gate {
        Gate::HealthWindow if inputs.bake_remaining_ms > 0 => result(
            gate,
            Verdict::Fail,
            format!(
                "bake window has not elapsed: {}s left",
                (inputs.bake_remaining_ms + 999) / 1000
            ),
        ),
        Gate::HealthWindow => result(gate, Verdict::Pass, "bake window elapsed".into()),
        Gate::ErrorRate { max_percent } => error_rate(*max_percent, inputs.error_counts),
        Gate::ThroughputDrop { max_drop_percent } => {
            throughput_drop(*max_drop_percent, inputs.baseline_eps, inputs.current_eps)
        }
        Gate::CustomPromQl {
            query,
            comparator,
            threshold,
        } => custom_promql(query, *comparator, *threshold, inputs.promql.get(query)),
    }
}

/// `errors / eventsIn * 100 <= maxPercent`. A canary that served no traffic cannot pass.
pub fn error_rate(max_percent: f64, counts: Option<ErrorCounts>) -> GateResult {
    let gate = Gate::ErrorRate { max_percent };
    let fail = |reason: &str| GateResult {
        threshold: Some(max_percent),
        ..result(&gate, Verdict::Fail, format!("{reason}: fails closed"))
    };
    let Some(ErrorCounts { errors, events_in }) = counts else {
        return fail("no error counters reported by canary nodes since the stage started");
    };
    if errors < 0 || events_in < 0 {
        return fail(&format!(
            "counters went negative ({errors} errors / {events_in} events)"
        ));
    }
    if events_in == 0 {
        return fail("no events processed by canary nodes since the stage started");
    }
    let rate = errors as f64 * 100.0 / events_in as f64;
    // Compare without dividing, so 10 errors in 1000 events is exactly 1 %.
    let within = errors as f64 * 100.0 <= max_percent * events_in as f64;
    let (verdict, relation) = if within {
        (Verdict::Pass, "is within")
    } else {
        (Verdict::Fail, "exceeds")
    };
    let reason = format!(
        "error rate {rate:.2}% {relation} max {max_percent:.2}% ({errors} errors / {events_in} events)"
    );
    GateResult {
        observed: Some(rate),
        threshold: Some(max_percent),
        ..result(&gate, verdict, reason)
    }
}

/// The drop from the pre-rollout baseline to the bake window's throughput, which must be
/// at most `maxDropPercent`. Without a (positive) baseline there is nothing to compare
/// against, so the gate is skipped; without rollups the pipeline reads as idle, a 100 % drop.
pub fn throughput_drop(
    max_drop_percent: f64,
    baseline_eps: Option<f64>,
    current_eps: Option<f64>,
) -> GateResult {
    let gate = Gate::ThroughputDrop { max_drop_percent };
    let skipped = |reason: String| GateResult {
        threshold: Some(max_drop_percent),
        ..result(&gate, Verdict::Skipped, reason)
    };
    let baseline = match baseline_eps {
        None => {
            return skipped("no baseline throughput was recorded at rollout start: skipped".into())
        }
        Some(b) if !(b.is_finite() && b > 0.0) => {
            return skipped(format!(
                "baseline throughput was {b} events/s, so a drop cannot be measured: skipped"
            ))
        }
        Some(b) => b,
    };
    let current = current_eps
        .filter(|c| c.is_finite() && *c > 0.0)
        .unwrap_or(0.0);
    let drop = (baseline - current) / baseline * 100.0;
    let verdict = if drop <= max_drop_percent {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    let movement = if drop >= 0.0 {
        format!("dropped {drop:.2}%")
    } else {
        format!("rose {:.2}%", -drop)
    };
    let relation = match verdict {
        Verdict::Fail => "exceeds",
        _ => "is within",
    };
    let absent = if current_eps.is_none() {
        "; no rollups during the bake window read as zero"
    } else {
        ""
    };
    let reason = format!(
        "throughput {movement} (baseline {baseline:.2} events/s, now {current:.2} events/s), \
         which {relation} max drop {max_drop_percent:.2}%{absent}"
    );
    GateResult {
        observed: Some(drop),
        threshold: Some(max_drop_percent),
        ..result(&gate, verdict, reason)
    }
}

/// `value <comparator> threshold` on a single-number instant query; anything else fails closed.
pub fn custom_promql(
    query: &str,
    comparator: Comparator,
    threshold: f64,
    outcome: Option<&PromQlOutcome>,
) -> GateResult {
    let gate = Gate::CustomPromQl {
        query: query.to_owned(),
        comparator,
        threshold,
    };
    let value = match outcome {
        None => Err("query was not run".to_owned()),
        Some(PromQlOutcome::Response { http_status, body }) => {
            parse_promql_response(*http_status, body)
        }
        Some(PromQlOutcome::Timeout) => Err("query timed out".to_owned()),
        Some(PromQlOutcome::ConnectError(detail)) => {
            Err(format!("could not reach Prometheus ({})", scrub(detail)))
        }
        Some(PromQlOutcome::Other(detail)) => Err(scrub(detail)),
    };
    let (verdict, observed, reason) = match value {
        Err(why) => (Verdict::Fail, None, format!("{why}: fails closed")),
        Ok(v) => {
            let phrase = comparator_phrase(comparator);
            if comparator.holds(v, threshold) {
                (
                    Verdict::Pass,
                    Some(v),
                    format!("query result {v} is {phrase} {threshold}"),
                )
            } else {
                (
                    Verdict::Fail,
                    Some(v),
                    format!("query result {v} is not {phrase} {threshold}"),
                )
            }
        }
    };
    GateResult {
        observed,
        threshold: Some(threshold),
        query: Some(query.to_owned()),
        ..result(&gate, verdict, reason)
    }
}

fn comparator_phrase(comparator: Comparator) -> &'static str {
    match comparator {
        Comparator::Lt => "less than",
        Comparator::Lte => "at most",
        Comparator::Gt => "greater than",
        Comparator::Gte => "at least",
    }
}

fn result(gate: &Gate, verdict: Verdict, reason: String) -> GateResult {
    GateResult {
        gate: gate.kind().to_owned(),
        verdict,
        observed: None,
        threshold: None,
        query: None,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn counts(errors: i64, events_in: i64) -> Option<ErrorCounts> {
        Some(ErrorCounts { errors, events_in })
    }

    #[test]
    fn health_window_fails_while_bake_time_is_left_and_passes_at_the_deadline() {
        let early = GateInputs {
            bake_remaining_ms: 12_500,
            ..GateInputs::default()
        };
        let r = evaluate(&Gate::HealthWindow, &early);
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.reason, "bake window has not elapsed: 13s left");
        let due = evaluate(&Gate::HealthWindow, &GateInputs::default());
        assert_eq!(due.verdict, Verdict::Pass);
    }

    fn ok_body(result_type: &str, result: Value) -> String {
        json!({"status": "success", "data": {"resultType": result_type, "result": result}})
            .to_string()
    }

    fn vector(values: &[&str]) -> String {
        let samples: Vec<Value> = values
            .iter()
            .map(|v| json!({"metric": {"job": "x"}, "value": [1_700_000_000.5, v]}))
            .collect();
        ok_body("vector", json!(samples))
    }

    fn promql_gate(comparator: Comparator, threshold: f64, outcome: PromQlOutcome) -> GateResult {
        custom_promql("rate(errors[5m])", comparator, threshold, Some(&outcome))
    }

    fn respond(body: String) -> PromQlOutcome {
        PromQlOutcome::Response {
            http_status: 200,
            body,
        }
    }

    #[test]
    fn the_health_window_passes_once_the_bake_elapsed() {
        let r = evaluate(&Gate::HealthWindow, &GateInputs::default());
        assert_eq!(
            (r.gate.as_str(), r.verdict),
            ("healthWindow", Verdict::Pass)
        );
    }

    #[test]
    fn an_error_rate_above_the_limit_fails_with_the_counts_in_the_reason() {
        let r = error_rate(1.0, counts(25, 1000));
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(
            r.reason,
            "error rate 2.50% exceeds max 1.00% (25 errors / 1000 events)"
        );
        assert_eq!((r.observed, r.threshold), (Some(2.5), Some(1.0)));
    }

    #[test]
    fn an_error_rate_exactly_at_the_limit_passes() {
        let r = error_rate(1.0, counts(10, 1000));
        assert_eq!(r.verdict, Verdict::Pass);
        assert_eq!(
            r.reason,
            "error rate 1.00% is within max 1.00% (10 errors / 1000 events)"
        );
        assert_eq!(error_rate(0.1, counts(1, 1000)).verdict, Verdict::Pass);
        assert_eq!(error_rate(0.0, counts(0, 5)).verdict, Verdict::Pass);
    }

    #[test]
    fn the_error_rate_gate_fails_closed_without_counters() {
        let r = error_rate(5.0, None);
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.reason.ends_with("fails closed"), "{}", r.reason);
        assert_eq!(r.observed, None);
    }

    #[test]
    fn a_canary_that_processed_no_events_cannot_pass_the_error_rate_gate() {
        let r = error_rate(100.0, counts(0, 0));
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(
            r.reason,
            "no events processed by canary nodes since the stage started: fails closed"
        );
    }

    #[test]
    fn negative_counters_fail_the_error_rate_gate() {
        assert_eq!(error_rate(100.0, counts(-1, 10)).verdict, Verdict::Fail);
        assert_eq!(error_rate(100.0, counts(0, -10)).verdict, Verdict::Fail);
    }

    #[test]
    fn the_throughput_gate_is_skipped_without_a_baseline() {
        let r = throughput_drop(20.0, None, Some(10.0));
        assert_eq!(r.verdict, Verdict::Skipped);
        assert!(r.passed());
        assert!(r.reason.contains("no baseline"), "{}", r.reason);
    }

    #[test]
    fn the_throughput_gate_is_skipped_and_says_so_when_the_baseline_is_zero() {
        let r = throughput_drop(20.0, Some(0.0), Some(10.0));
        assert_eq!(r.verdict, Verdict::Skipped);
        assert!(
            r.reason.contains("baseline throughput was 0 events/s"),
            "{}",
            r.reason
        );
    }

    #[test]
    fn absent_rollups_read_as_a_one_hundred_percent_drop() {
        let r = throughput_drop(20.0, Some(50.0), None);
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.observed, Some(100.0));
        assert!(r.reason.contains("read as zero"), "{}", r.reason);
    }

    #[test]
    fn a_drop_beyond_the_limit_fails_and_within_it_passes() {
        let r = throughput_drop(20.0, Some(100.0), Some(65.0));
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(
            r.reason,
            "throughput dropped 35.00% (baseline 100.00 events/s, now 65.00 events/s), \
             which exceeds max drop 20.00%"
        );
        assert_eq!(
            throughput_drop(20.0, Some(100.0), Some(80.0)).verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn rising_throughput_passes_as_a_negative_drop() {
        let r = throughput_drop(0.0, Some(100.0), Some(110.0));
        assert_eq!(r.verdict, Verdict::Pass);
        assert!(
            r.reason.starts_with("throughput rose 10.00%"),
            "{}",
            r.reason
        );
    }

    #[test]
    fn each_comparator_applies_as_value_cmp_threshold() {
        let at = |c, threshold| promql_gate(c, threshold, respond(vector(&["0.5"]))).verdict;
        assert_eq!(at(Comparator::Lt, 0.5), Verdict::Fail);
        assert_eq!(at(Comparator::Lt, 0.6), Verdict::Pass);
        assert_eq!(at(Comparator::Lte, 0.5), Verdict::Pass);
        assert_eq!(at(Comparator::Gt, 0.5), Verdict::Fail);
        assert_eq!(at(Comparator::Gt, 0.4), Verdict::Pass);
        assert_eq!(at(Comparator::Gte, 0.5), Verdict::Pass);
        assert_eq!(at(Comparator::Gte, 0.6), Verdict::Fail);
    }

    #[test]
    fn a_promql_result_records_its_query_value_and_threshold() {
        let r = promql_gate(Comparator::Lt, 0.5, respond(vector(&["0.3"])));
        assert_eq!(r.gate, "customPromQL");
        assert_eq!(r.query.as_deref(), Some("rate(errors[5m])"));
        assert_eq!((r.observed, r.threshold), (Some(0.3), Some(0.5)));
        assert_eq!(r.reason, "query result 0.3 is less than 0.5");
    }

    #[test]
    fn a_promql_gate_fails_closed_on_timeout_connection_errors_and_missing_runs() {
        let timeout = promql_gate(Comparator::Lt, 1.0, PromQlOutcome::Timeout);
        assert_eq!(timeout.reason, "query timed out: fails closed");
        let refused = promql_gate(
            Comparator::Lt,
            1.0,
            PromQlOutcome::ConnectError("connection refused".into()),
        );
        assert_eq!(
            refused.reason,
            "could not reach Prometheus (connection refused): fails closed"
        );
        let other = promql_gate(
            Comparator::Lt,
            1.0,
            PromQlOutcome::Other("body too large".into()),
        );
        assert_eq!(other.reason, "body too large: fails closed");
        let never = custom_promql("up", Comparator::Lt, 1.0, None);
        assert_eq!(never.reason, "query was not run: fails closed");
        for r in [timeout, refused, other, never] {
            assert_eq!(r.verdict, Verdict::Fail);
        }
    }

    #[test]
    fn promql_reasons_never_repeat_credentials_from_error_text() {
        let r = promql_gate(
            Comparator::Lt,
            1.0,
            PromQlOutcome::ConnectError(
                "error sending request for url (https://admin:s3cret@prom:9090/api/v1/query): \
                 Authorization: Bearer abc.def.ghi rejected"
                    .into(),
            ),
        );
        assert!(!r.reason.contains("s3cret"), "{}", r.reason);
        assert!(!r.reason.contains("admin"), "{}", r.reason);
        assert!(!r.reason.contains("abc.def.ghi"), "{}", r.reason);
        assert!(r.reason.contains("https://***@prom:9090"), "{}", r.reason);
    }

    #[test]
    fn overlong_error_text_is_shortened() {
        let r = promql_gate(Comparator::Lt, 1.0, PromQlOutcome::Other("x".repeat(5000)));
        assert!(r.reason.len() < 400, "{}", r.reason.len());
    }

    #[test]
    fn a_stage_runs_each_gate_with_its_own_promql_outcome() {
        let gates = [
            Gate::HealthWindow,
            Gate::CustomPromQl {
                query: "a".into(),
                comparator: Comparator::Lt,
                threshold: 1.0,
            },
            Gate::CustomPromQl {
                query: "b".into(),
                comparator: Comparator::Lt,
                threshold: 1.0,
            },
        ];
        let inputs = GateInputs {
            promql: BTreeMap::from([
                ("a".to_owned(), respond(vector(&["0"]))),
                ("b".to_owned(), respond(vector(&["2"]))),
            ]),
            ..GateInputs::default()
        };
        let results = evaluate_stage(&gates, &inputs);
        let verdicts: Vec<Verdict> = results.iter().map(|r| r.verdict).collect();
        assert_eq!(verdicts, [Verdict::Pass, Verdict::Pass, Verdict::Fail]);
        assert!(!all_passed(&results));
    }

    #[test]
    fn each_distinct_promql_query_of_a_stage_is_listed_once() {
        let promql = |query: &str| Gate::CustomPromQl {
            query: query.into(),
            comparator: Comparator::Lt,
            threshold: 1.0,
        };
        let gates = [promql("b"), Gate::HealthWindow, promql("a"), promql("b")];
        assert_eq!(promql_queries(&gates), ["b", "a"]);
    }

    #[test]
    fn skipped_gates_count_as_passing_and_no_gates_pass() {
        let skipped = throughput_drop(20.0, None, None);
        let pass = evaluate(&Gate::HealthWindow, &GateInputs::default());
        assert!(all_passed(&[skipped, pass]));
        assert!(all_passed(&[]));
    }

    #[test]
    fn gate_results_serialise_in_camel_case() {
        let r = error_rate(1.0, counts(25, 1000));
        let json = serde_json::to_value(&r).expect("serialises");
        assert_eq!(json["gate"], "errorRate");
        assert_eq!(json["verdict"], "fail");
        assert_eq!(json["observed"], 2.5);
        assert_eq!(json["threshold"], 1.0);
        assert_eq!(json["query"], Value::Null);
        let back: GateResult = serde_json::from_value(json).expect("deserialises");
        assert_eq!(back, r);
    }

    proptest! {
        #[test]
        fn the_error_rate_gate_never_passes_with_zero_events(
            errors in any::<i64>(),
            max in 0.0f64..=100.0,
        ) {
            prop_assert_eq!(error_rate(max, counts(errors, 0)).verdict, Verdict::Fail);
        }
    }
}
