//! Gate verdicts, computed from inputs the caller already fetched (counters, rollups, a
//! Prometheus response), so the rules are testable without a database or a Prometheus.
//!
//! One check of a gate ([`evaluate`]) gives one of three verdicts on its signal: pass, fail,
//! or no number to judge, split into `Inconclusive` (no data: no events yet, an empty
//! query result) and `Error` (the signal could not be read: Prometheus unreachable, a
//! timeout, a malformed answer). During a bake those never fail a gate. When a verdict is
//! final (at the bake deadline, or an operator's advance) [`settle`] applies the gate's
//! `onNoData`: `fail` (the default, today's fail-closed rule) or `hold`. `throughputDrop`
//! without a baseline is `Skipped`, as the SPEC says: there is nothing to compare against.
//!
//! Each result carries its evidence (observed value, threshold, query, a human reason)
//! because the release records it and the rollout view shows it. Reasons never contain
//! credentials: they are built from the response body and the caller's error text (with URL
//! userinfo and bearer tokens masked, see [`crate::promql`]), never from request headers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::{Comparator, Gate, OnNoData, Scope};
use crate::promql::{parse_promql_response, scrub, PromQlError};

/// A gate's outcome. `Skipped` counts as passing: the gate had nothing to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    Pass,
    Fail,
    /// No data to judge yet (no events, no series).
    Inconclusive,
    /// The signal could not be read (Prometheus unreachable, timeout, malformed answer).
    Error,
    Skipped,
}

impl Verdict {
    /// The stored and `/metrics` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Error => "error",
            Verdict::Skipped => "skipped",
        }
    }

    /// Inconclusive or error: the check had no number to compare.
    pub fn without_number(self) -> bool {
        matches!(self, Verdict::Inconclusive | Verdict::Error)
    }
}

/// One gate's verdict with the evidence recorded on the release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
        matches!(self.verdict, Verdict::Pass | Verdict::Skipped)
    }
}

/// Error and event counter totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErrorCounts {
    pub errors: i64,
    pub events_in: i64,
}

/// One canary node's error and event counter deltas running the canary version since the
/// current stage started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeErrors {
    /// The node's name, as evidence names it.
    pub node: String,
    /// Added by the current stage (rather than an earlier one).
    pub this_stage: bool,
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

/// A canary node that reports the canary version failed: a vf-agent's `CRASHED` (or a
/// `failedVersion` it reverted from), an OpAMP collector's `FAILED` remote config status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCrash {
    pub node: String,
    pub reason: String,
}

/// What the nodes a release targets report about its canary version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CanaryNodes {
    pub canary_version: i64,
    /// Nodes any started stage targeted.
    pub targeted: usize,
    /// Of those, nodes reporting the canary version `RUNNING` (an OpAMP collector: APPLIED
    /// and healthy).
    pub applied: usize,
    /// A few of the nodes that have not, each with what it reports
    /// (`edge-7 UNREACHABLE`, `edge-9 runs v3 RUNNING`), in node id order.
    pub not_applied: Vec<String>,
    pub crashed: Vec<NodeCrash>,
}

/// Everything a stage's gates read. `None` means "no data", which each gate treats as the
/// SPEC says. PromQL outcomes are keyed by query text since a stage may run several.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GateInputs {
    /// The canary nodes' reports, for proof of apply and crashes; `None` skips both.
    pub canary: Option<CanaryNodes>,
    /// Per canary node that reported counters; `None` when none did.
    pub error_counts: Option<Vec<NodeErrors>>,
    /// Pipeline aggregate events/s over the 5 minutes before the rollout, captured at create.
    pub baseline_eps: Option<f64>,
    /// Pipeline aggregate events/s over the bake window; `None` when no rollups exist.
    pub current_eps: Option<f64>,
    pub promql: BTreeMap<String, PromQlOutcome>,
    /// Milliseconds of bake left. The scheduler evaluates at the deadline (0); an operator
    /// pressing "Advance" early evaluates with time left, and healthWindow then fails.
    pub bake_remaining_ms: i64,
    /// What the stage's offline rule decided ([`crate::offline::decide`]); `None` when every
    /// targeted node is heard from. The other inputs already leave its excluded nodes out.
    pub offline: Option<GateResult>,
}

/// The distinct PromQL queries of `gates`, in plan order: what the caller runs (each bounded
/// by its timeout) to fill [`GateInputs::promql`].
pub fn promql_queries<'g>(gates: impl IntoIterator<Item = &'g Gate>) -> Vec<&'g str> {
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

/// What a stage is judged on at its deadline or by an operator's action: every gate in plan
/// order, each [`settle`]d, then canary crashes ([`crashed`]) and proof of apply ([`applied`],
/// off with `minAppliedPercent: 0`) when the inputs carry the canary nodes' reports, then
/// the offline nodes' result ([`crate::offline`]) when any node is offline or departed.
pub fn stage_results(
    gates: &[Gate],
    min_applied_percent: f64,
    inputs: &GateInputs,
) -> Vec<GateResult> {
    let checks = gates.iter().map(|gate| evaluate(gate, inputs)).collect();
    stage_results_of(gates, checks, min_applied_percent, inputs)
}

/// [`stage_results`] from checks of `gates` already made (one per gate, in plan order), so
/// a caller that also keeps the raw checks does not evaluate twice.
pub fn stage_results_of(
    gates: &[Gate],
    checks: Vec<GateResult>,
    min_applied_percent: f64,
    inputs: &GateInputs,
) -> Vec<GateResult> {
    let mut results: Vec<GateResult> = (gates.iter().zip(checks))
        .map(|(gate, check)| settle(gate, check))
        .collect();
    if let Some(canary) = &inputs.canary {
        results.extend(crashed(canary));
        if min_applied_percent > 0.0 {
            results.push(applied(min_applied_percent, canary));
        }
    }
    results.extend(inputs.offline.clone());
    results
}

/// Whether a stage may proceed: every gate passed or was skipped.
pub fn all_passed(results: &[GateResult]) -> bool {
    results.iter().all(GateResult::passed)
}

/// Makes a check final: a gate with no number (inconclusive or error) fails closed under
/// `onNoData: "fail"` and stays as it is (the caller holds) under `"hold"`.
pub fn settle(gate: &Gate, mut result: GateResult) -> GateResult {
    let Some(watch) = gate.watch() else {
        return result;
    };
    if result.verdict.without_number() {
        match watch.on_no_data {
            OnNoData::Fail => {
                result.verdict = Verdict::Fail;
                result.reason.push_str(": fails closed");
            }
            OnNoData::Hold => result.reason.push_str(": onNoData is hold"),
        }
    }
    result
}

/// One check of one gate.
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
        Gate::ErrorRate {
            max_percent, scope, ..
        } => error_rate(*max_percent, *scope, inputs.error_counts.as_deref()),
        Gate::ThroughputDrop {
            max_drop_percent, ..
        } => throughput_drop(*max_drop_percent, inputs.baseline_eps, inputs.current_eps),
        Gate::CustomPromQl {
            query,
            comparator,
            threshold,
            ..
        } => custom_promql(query, *comparator, *threshold, inputs.promql.get(query)),
    }
}

/// How many nodes the error-rate evidence names.
const TOP_NODES: usize = 3;

/// `errors / eventsIn * 100 <= maxPercent` over the canary nodes `scope` counts. No counters
/// or no events is inconclusive: a canary that served no traffic has not shown anything.
/// The reason splits the counts between the nodes this stage added and the earlier stages,
/// and names the nodes with the most errors.
pub fn error_rate(max_percent: f64, scope: Scope, nodes: Option<&[NodeErrors]>) -> GateResult {
    let gate = Gate::ErrorRate {
        max_percent,
        scope,
        watch: Default::default(),
    };
    let no_number = |verdict: Verdict, reason: String| GateResult {
        threshold: Some(max_percent),
        ..result(&gate, verdict, reason)
    };
    let stage_only = scope == Scope::Stage;
    let counted = |n: &&NodeErrors| !stage_only || n.this_stage;
    let nodes = nodes.unwrap_or_default();
    if !nodes.iter().any(|n| counted(&n)) {
        return no_number(
            Verdict::Inconclusive,
            format!(
                "no error counters reported by {} since the stage started",
                noun(scope)
            ),
        );
    }
    let total = |filter: &dyn Fn(&NodeErrors) -> bool| {
        nodes
            .iter()
            .filter(|n| filter(n))
            .fold(ErrorCounts::default(), |sum, n| ErrorCounts {
                errors: sum.errors.saturating_add(n.errors),
                events_in: sum.events_in.saturating_add(n.events_in),
            })
    };
    let ErrorCounts { errors, events_in } = total(&|n| counted(&n));
    if errors < 0 || events_in < 0 {
        return no_number(
            Verdict::Error,
            format!("counters went negative ({errors} errors / {events_in} events)"),
        );
    }
    if events_in == 0 {
        return no_number(
            Verdict::Inconclusive,
            format!(
                "no events processed by {} since the stage started",
                noun(scope)
            ),
        );
    }
    let rate = errors as f64 * 100.0 / events_in as f64;
    // Compare without dividing, so 10 errors in 1000 events is exactly 1 %.
    let within = errors as f64 * 100.0 <= max_percent * events_in as f64;
    let (verdict, relation) = if within {
        (Verdict::Pass, "is within")
    } else {
        (Verdict::Fail, "exceeds")
    };
    let mut reason = format!(
        "error rate {rate:.2}% {relation} max {max_percent:.2}% ({errors} errors / {events_in} events)"
    );
    let earlier = total(&|n| !n.this_stage);
    if nodes.iter().any(|n| !n.this_stage) {
        let this = total(&|n| n.this_stage);
        let counted = if stage_only { ", not counted" } else { "" };
        reason.push_str(&format!(
            "; this stage's nodes {} errors / {} events, earlier stages' {} / {}{counted}",
            this.errors, this.events_in, earlier.errors, earlier.events_in
        ));
    }
    let mut worst: Vec<&NodeErrors> = nodes
        .iter()
        .filter(|n| counted(n) && n.errors > 0)
        .collect();
    worst.sort_by(|a, b| b.errors.cmp(&a.errors).then(a.node.cmp(&b.node)));
    if !worst.is_empty() {
        let named: Vec<String> = (worst.iter().take(TOP_NODES))
            .map(|n| format!("{} {}/{}", n.node, n.errors, n.events_in))
            .collect();
        reason.push_str(&format!("; most errors: {}", named.join(", ")));
    }
    GateResult {
        observed: Some(rate),
        threshold: Some(max_percent),
        ..result(&gate, verdict, reason)
    }
}

fn noun(scope: Scope) -> &'static str {
    match scope {
        Scope::Cumulative => "canary nodes",
        Scope::Stage => "this stage's nodes",
    }
}

/// The drop from the pre-rollout baseline to the bake window's throughput, which must be
/// at most `maxDropPercent`. Without a (positive) baseline there is nothing to compare
/// against, so the gate is skipped; without rollups since the stage started it is
/// inconclusive (settled by `onNoData`: by default it fails closed).
pub fn throughput_drop(
    max_drop_percent: f64,
    baseline_eps: Option<f64>,
    current_eps: Option<f64>,
) -> GateResult {
    let gate = Gate::ThroughputDrop {
        max_drop_percent,
        watch: Default::default(),
    };
    let no_number = |verdict: Verdict, reason: String| GateResult {
        threshold: Some(max_drop_percent),
        ..result(&gate, verdict, reason)
    };
    let baseline = match baseline_eps {
        None => {
            return no_number(
                Verdict::Skipped,
                "no baseline throughput was recorded at rollout start: skipped".into(),
            )
        }
        Some(b) if !(b.is_finite() && b > 0.0) => {
            return no_number(
                Verdict::Skipped,
                format!(
                    "baseline throughput was {b} events/s, so a drop cannot be measured: skipped"
                ),
            )
        }
        Some(b) => b,
    };
    let Some(current) = current_eps.filter(|c| c.is_finite() && *c >= 0.0) else {
        return no_number(
            Verdict::Inconclusive,
            format!("no rollups since the stage started (baseline {baseline:.2} events/s)"),
        );
    };
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
    let reason = format!(
        "throughput {movement} (baseline {baseline:.2} events/s, now {current:.2} events/s), \
         which {relation} max drop {max_drop_percent:.2}%"
    );
    GateResult {
        observed: Some(drop),
        threshold: Some(max_drop_percent),
        ..result(&gate, verdict, reason)
    }
}

/// `value <comparator> threshold` on a single-number instant query. An empty result is
/// inconclusive; an unreachable Prometheus, a timeout or an answer that is not one number
/// is an error.
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
        watch: Default::default(),
    };
    let value = read_promql(outcome);
    let (verdict, observed, reason) = match value {
        Err(PromQlError { no_data, reason }) => {
            let verdict = if no_data {
                Verdict::Inconclusive
            } else {
                Verdict::Error
            };
            (verdict, None, reason)
        }
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

/// Canary nodes reporting the canary version failed fail the stage at once, named with
/// their messages; `None` when no node did.
pub fn crashed(canary: &CanaryNodes) -> Option<GateResult> {
    if canary.crashed.is_empty() {
        return None;
    }
    let v = canary.canary_version;
    let named: Vec<String> = (canary.crashed.iter().take(TOP_NODES))
        .map(|c| format!("{} reports v{v} CRASHED: {}", c.node, c.reason))
        .collect();
    let more = canary.crashed.len().saturating_sub(TOP_NODES);
    let mut reason = named.join("; ");
    if more > 0 {
        reason.push_str(&format!("; and {more} more"));
    }
    Some(GateResult {
        gate: CANARY_CRASH.to_owned(),
        verdict: Verdict::Fail,
        observed: Some(canary.crashed.len() as f64),
        threshold: Some(0.0),
        query: None,
        reason,
    })
}

/// The pseudo-gate name of [`crashed`] in evidence.
pub const CANARY_CRASH: &str = "canaryCrash";
/// The pseudo-gate name of [`applied`] in evidence.
pub const APPLIED: &str = "applied";

/// Proof of apply: at least `min_percent` of the targeted nodes report running the canary.
/// Short of it the check is inconclusive, so the release holds for an operator (never rolls
/// back: a node that is down has not shown the canary is bad), naming nodes that have not.
pub fn applied(min_percent: f64, canary: &CanaryNodes) -> GateResult {
    let CanaryNodes {
        canary_version: v,
        targeted,
        applied,
        ..
    } = *canary;
    let share = if targeted == 0 {
        100.0
    } else {
        applied as f64 * 100.0 / targeted as f64
    };
    // Compare without dividing, so 19 of 20 is exactly 95 %.
    let enough = applied as f64 * 100.0 >= min_percent * targeted as f64;
    let (verdict, reason) = if enough {
        (
            Verdict::Pass,
            format!("{applied} of {targeted} nodes run v{v}"),
        )
    } else {
        let missing = targeted.saturating_sub(applied);
        let mut named = canary.not_applied.join(", ");
        if missing > canary.not_applied.len() {
            named.push_str(", ...");
        }
        (
            Verdict::Inconclusive,
            format!(
                "{missing} of {targeted} nodes have not applied v{v}: {named} \
                 ({share:.2}% applied, at least {min_percent}% needed)"
            ),
        )
    };
    GateResult {
        gate: APPLIED.to_owned(),
        verdict,
        observed: Some(share),
        threshold: Some(min_percent),
        query: None,
        reason,
    }
}

/// A query's outcome down to its one number, or why not.
fn read_promql(outcome: Option<&PromQlOutcome>) -> Result<f64, PromQlError> {
    match outcome {
        None => Err(PromQlError::unusable("query was not run")),
        Some(PromQlOutcome::Response { http_status, body }) => {
            parse_promql_response(*http_status, body)
        }
        Some(PromQlOutcome::Timeout) => Err(PromQlError::unusable("query timed out")),
        Some(PromQlOutcome::ConnectError(detail)) => Err(PromQlError::unusable(format!(
            "could not reach Prometheus ({})",
            scrub(detail)
        ))),
        Some(PromQlOutcome::Other(detail)) => Err(PromQlError::unusable(scrub(detail))),
    }
}

/// The preflight of a `customPromQL` gate when a plan is created: the query, run once, must
/// yield exactly one number. The error says what came back instead, for the operator.
pub fn preflight(outcome: &PromQlOutcome) -> Result<f64, String> {
    read_promql(Some(outcome)).map_err(|e| {
        if e.no_data {
            format!(
                "returns no data now ({}); a gate needs exactly one number",
                e.reason
            )
        } else {
            format!("does not return exactly one number: {}", e.reason)
        }
    })
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

    fn node(name: &str, this_stage: bool, errors: i64, events_in: i64) -> NodeErrors {
        NodeErrors {
            node: name.into(),
            this_stage,
            errors,
            events_in,
        }
    }

    /// The cumulative error rate of one node added by this stage.
    fn rate(max_percent: f64, errors: i64, events_in: i64) -> GateResult {
        let nodes = [node("edge-1", true, errors, events_in)];
        error_rate(max_percent, Scope::Cumulative, Some(&nodes))
    }

    fn error_gate(on_no_data: OnNoData) -> Gate {
        Gate::ErrorRate {
            max_percent: 1.0,
            scope: Scope::Cumulative,
            watch: crate::plan::Watch {
                on_no_data,
                ..Default::default()
            },
        }
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
        let r = rate(1.0, 25, 1000);
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(
            r.reason,
            "error rate 2.50% exceeds max 1.00% (25 errors / 1000 events); \
             most errors: edge-1 25/1000"
        );
        assert_eq!((r.observed, r.threshold), (Some(2.5), Some(1.0)));
    }

    #[test]
    fn an_error_rate_exactly_at_the_limit_passes() {
        let r = rate(1.0, 10, 1000);
        assert_eq!(r.verdict, Verdict::Pass);
        assert!(
            r.reason
                .starts_with("error rate 1.00% is within max 1.00% (10 errors / 1000 events)"),
            "{}",
            r.reason
        );
        assert_eq!(rate(0.1, 1, 1000).verdict, Verdict::Pass);
        assert_eq!(rate(0.0, 0, 5).verdict, Verdict::Pass);
        assert_eq!(
            rate(0.0, 0, 5).reason,
            "error rate 0.00% is within max 0.00% (0 errors / 5 events)"
        );
    }

    #[test]
    fn without_counters_the_error_rate_check_is_inconclusive_and_settles_by_policy() {
        let r = error_rate(5.0, Scope::Cumulative, None);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert_eq!(r.observed, None);
        let closed = settle(&error_gate(OnNoData::Fail), r.clone());
        assert_eq!(closed.verdict, Verdict::Fail);
        assert_eq!(
            closed.reason,
            "no error counters reported by canary nodes since the stage started: fails closed"
        );
        let held = settle(&error_gate(OnNoData::Hold), r);
        assert_eq!(held.verdict, Verdict::Inconclusive);
        assert!(
            held.reason.ends_with(": onNoData is hold"),
            "{}",
            held.reason
        );
        assert!(!held.passed());
    }

    #[test]
    fn a_canary_that_processed_no_events_cannot_pass_the_error_rate_gate() {
        let r = rate(100.0, 0, 0);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert_eq!(
            settle(&error_gate(OnNoData::Fail), r).reason,
            "no events processed by canary nodes since the stage started: fails closed"
        );
    }

    #[test]
    fn negative_counters_are_an_error_reading_the_signal() {
        assert_eq!(rate(100.0, -1, 10).verdict, Verdict::Error);
        assert_eq!(rate(100.0, 0, -10).verdict, Verdict::Error);
    }

    #[test]
    fn error_rate_evidence_splits_this_stage_from_earlier_ones_and_names_the_worst_nodes() {
        let nodes = [
            node("edge-1", false, 0, 900),
            node("edge-7", true, 40, 60),
            node("edge-3", true, 5, 40),
            node("edge-9", true, 1, 100),
            node("edge-2", true, 1, 100),
        ];
        let cumulative = error_rate(5.0, Scope::Cumulative, Some(&nodes));
        assert_eq!(
            cumulative.reason,
            "error rate 3.92% is within max 5.00% (47 errors / 1200 events); \
             this stage's nodes 47 errors / 300 events, earlier stages' 0 / 900; \
             most errors: edge-7 40/60, edge-3 5/40, edge-2 1/100"
        );
        assert_eq!(cumulative.verdict, Verdict::Pass);
        let stage = error_rate(5.0, Scope::Stage, Some(&nodes));
        assert_eq!(stage.verdict, Verdict::Fail, "{}", stage.reason);
        assert_eq!(stage.observed, Some(47.0 * 100.0 / 300.0));
        assert!(
            stage
                .reason
                .contains("earlier stages' 0 / 900, not counted"),
            "{}",
            stage.reason
        );
        let only_earlier = [node("edge-1", false, 0, 900)];
        let r = error_rate(5.0, Scope::Stage, Some(&only_earlier));
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert_eq!(
            r.reason,
            "no error counters reported by this stage's nodes since the stage started"
        );
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
    fn without_rollups_the_throughput_check_is_inconclusive_and_by_default_fails_closed() {
        let r = throughput_drop(20.0, Some(50.0), None);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert_eq!(r.observed, None);
        let gate = Gate::ThroughputDrop {
            max_drop_percent: 20.0,
            watch: Default::default(),
        };
        let settled = settle(&gate, r);
        assert_eq!(settled.verdict, Verdict::Fail);
        assert_eq!(
            settled.reason,
            "no rollups since the stage started (baseline 50.00 events/s): fails closed"
        );
        // Rollups that counted nothing are data: a 100 % drop.
        let idle = throughput_drop(20.0, Some(50.0), Some(0.0));
        assert_eq!((idle.verdict, idle.observed), (Verdict::Fail, Some(100.0)));
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
    fn the_preflight_wants_exactly_one_number_and_says_what_came_back() {
        assert_eq!(preflight(&respond(vector(&["0.5"]))), Ok(0.5));
        assert_eq!(
            preflight(&respond(vector(&["1", "2", "3"]))),
            Err("does not return exactly one number: multi-sample vector (3 series)".into())
        );
        assert_eq!(
            preflight(&respond(vector(&[]))),
            Err("returns no data now (empty vector: no series matched); \
                 a gate needs exactly one number"
                .into())
        );
        assert_eq!(
            preflight(&PromQlOutcome::Timeout),
            Err("does not return exactly one number: query timed out".into())
        );
    }

    #[test]
    fn an_empty_promql_answer_is_inconclusive() {
        let r = promql_gate(Comparator::Lt, 1.0, respond(vector(&[])));
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert_eq!(r.reason, "empty vector: no series matched");
        let many = promql_gate(Comparator::Lt, 1.0, respond(vector(&["1", "2"])));
        assert_eq!(many.verdict, Verdict::Error);
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
    fn timeouts_connection_errors_and_missing_runs_are_errors_that_fail_closed_when_final() {
        let timeout = promql_gate(Comparator::Lt, 1.0, PromQlOutcome::Timeout);
        assert_eq!(timeout.reason, "query timed out");
        let refused = promql_gate(
            Comparator::Lt,
            1.0,
            PromQlOutcome::ConnectError("connection refused".into()),
        );
        assert_eq!(
            refused.reason,
            "could not reach Prometheus (connection refused)"
        );
        let other = promql_gate(
            Comparator::Lt,
            1.0,
            PromQlOutcome::Other("body too large".into()),
        );
        assert_eq!(other.reason, "body too large");
        let never = custom_promql("up", Comparator::Lt, 1.0, None);
        assert_eq!(never.reason, "query was not run");
        let gate = Gate::CustomPromQl {
            query: "rate(errors[5m])".into(),
            comparator: Comparator::Lt,
            threshold: 1.0,
            watch: Default::default(),
        };
        for r in [timeout, refused, other, never] {
            assert_eq!(r.verdict, Verdict::Error);
            let settled = settle(&gate, r);
            assert_eq!(settled.verdict, Verdict::Fail);
            assert!(settled.reason.ends_with(": fails closed"));
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
                watch: Default::default(),
            },
            Gate::CustomPromQl {
                query: "b".into(),
                comparator: Comparator::Lt,
                threshold: 1.0,
                watch: Default::default(),
            },
        ];
        let inputs = GateInputs {
            promql: BTreeMap::from([
                ("a".to_owned(), respond(vector(&["0"]))),
                ("b".to_owned(), respond(vector(&["2"]))),
            ]),
            ..GateInputs::default()
        };
        // Without canary reports in the inputs, only the gates are judged.
        let results = stage_results(&gates, 100.0, &inputs);
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
            watch: Default::default(),
        };
        let gates = [promql("b"), Gate::HealthWindow, promql("a"), promql("b")];
        assert_eq!(promql_queries(&gates), ["b", "a"]);
    }

    fn canary(targeted: usize, applied: usize, not_applied: &[&str]) -> CanaryNodes {
        CanaryNodes {
            canary_version: 4,
            targeted,
            applied,
            not_applied: not_applied.iter().map(|s| s.to_string()).collect(),
            crashed: Vec::new(),
        }
    }

    #[test]
    fn a_stage_needs_its_share_of_nodes_running_the_canary_and_names_those_that_do_not() {
        let short = applied(
            100.0,
            &canary(20, 17, &["edge-7 UNREACHABLE", "edge-9 runs v3 RUNNING"]),
        );
        assert_eq!(short.gate, "applied");
        assert_eq!(short.verdict, Verdict::Inconclusive);
        assert_eq!(
            short.reason,
            "3 of 20 nodes have not applied v4: edge-7 UNREACHABLE, edge-9 runs v3 RUNNING, ... \
             (85.00% applied, at least 100% needed)"
        );
        assert_eq!(applied(85.0, &canary(20, 17, &[])).verdict, Verdict::Pass);
        assert_eq!(applied(95.0, &canary(20, 19, &[])).verdict, Verdict::Pass);
        assert_eq!(applied(0.0, &canary(20, 0, &[])).verdict, Verdict::Pass);
        let all = applied(100.0, &canary(0, 0, &[]));
        assert_eq!(
            (all.verdict, all.reason.as_str()),
            (Verdict::Pass, "0 of 0 nodes run v4")
        );
    }

    #[test]
    fn a_crashed_canary_node_fails_the_stage_with_its_message() {
        assert_eq!(crashed(&canary(2, 2, &[])), None);
        let mut nodes = canary(5, 1, &[]);
        nodes.crashed = (1..=4)
            .map(|i| NodeCrash {
                node: format!("edge-{i}"),
                reason: "exited 3 times within 60 s".into(),
            })
            .collect();
        let r = crashed(&nodes).expect("crashed");
        assert_eq!((r.gate.as_str(), r.verdict), ("canaryCrash", Verdict::Fail));
        assert_eq!(
            r.reason,
            "edge-1 reports v4 CRASHED: exited 3 times within 60 s; edge-2 reports v4 CRASHED: \
             exited 3 times within 60 s; edge-3 reports v4 CRASHED: exited 3 times within 60 s; \
             and 1 more"
        );
        let inputs = GateInputs {
            canary: Some(nodes),
            ..GateInputs::default()
        };
        let results = stage_results(&[Gate::HealthWindow], 100.0, &inputs);
        let gates: Vec<&str> = results.iter().map(|r| r.gate.as_str()).collect();
        assert_eq!(gates, ["healthWindow", "canaryCrash", "applied"]);
        let off = stage_results(&[Gate::HealthWindow], 0.0, &inputs);
        assert_eq!(off.len(), 2, "minAppliedPercent 0 turns proof of apply off");
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
        let r = rate(1.0, 25, 1000);
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
            prop_assert!(!rate(max, errors, 0).passed());
        }
    }
}
