//! What a valid rollout plan is: reading the wire JSON into a [`RolloutPlan`].
//!
//! Errors name the field the way the editor shows it (`stages[2].bakeSeconds: must be at
//! least 30`) and come in document order: stages first (selector, bakeSeconds, gates within
//! each), then the two toggles, and an object's unknown fields after its known ones. Unknown
//! fields are refused rather than ignored so that a typo such as `autoAdvanced: false` cannot
//! silently leave auto-advance on. Each reader below pushes its errors and returns `None`
//! when it pushed any, so one pass yields both the first error and the full list.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{
    BakeSeconds, CanarySelector, Comparator, Gate, OnNoData, PlanError, RolloutPlan, Scope,
    Selector, Stage, Watch, DEFAULT_MIN_APPLIED_PERCENT, MAX_STAGES,
};
use crate::offline::{OfflinePolicy, OfflineSettings, MAX_OFFLINE_AFTER_SECONDS};
use crate::percent::Percent;

impl RolloutPlan {
    /// Parses the wire JSON, refusing with the first error in document order.
    pub fn parse(value: &Value) -> Result<RolloutPlan, PlanError> {
        let mut errors = Vec::new();
        let plan = parse_plan(value, &mut errors);
        match (plan, errors.into_iter().next()) {
            (_, Some(first)) => Err(first),
            (Some(plan), None) => Ok(plan),
            (None, None) => Err(PlanError::new("rolloutPlan", "is invalid")),
        }
    }

    /// Every error at once, in document order, so the editor can mark every bad field.
    /// Empty means [`RolloutPlan::parse`] succeeds.
    pub fn validate_all(value: &Value) -> Vec<PlanError> {
        let mut errors = Vec::new();
        parse_plan(value, &mut errors);
        errors
    }
}

/// Reads a plan-less canary's selector (`{"percentage": p}` or `{"labels": {...}}`), naming
/// errors under `field_name` (e.g. `canarySelector.percentage: must be greater than 0`).
pub fn parse_canary_selector(value: &Value, field_name: &str) -> Result<CanarySelector, PlanError> {
    let mut errors = Vec::new();
    let selector = parse_selector(value, field_name, &["percentage", "labels"], &mut errors);
    match (selector, errors.into_iter().next()) {
        (_, Some(first)) => Err(first),
        (Some(Selector::Percentage(p)), None) => Ok(CanarySelector::Percentage(p)),
        (Some(Selector::Labels(labels)), None) => Ok(CanarySelector::Labels(labels)),
        (_, None) => Err(PlanError::new(
            field_name,
            "must select by labels or percentage",
        )),
    }
}

type Errors = Vec<PlanError>;

fn parse_plan(value: &Value, errors: &mut Errors) -> Option<RolloutPlan> {
    let obj = object(value, "rolloutPlan", errors)?;
    let stages = match obj.get("stages") {
        None => missing("stages", errors),
        Some(stages) => parse_stages(stages, errors),
    };
    let auto_advance = optional_bool(obj, "autoAdvance", errors);
    let auto_rollback = optional_bool(obj, "autoRollbackOnGateFail", errors);
    let min_applied = optional_percent(obj, None, "minAppliedPercent", errors)
        .map(|min| min.unwrap_or(DEFAULT_MIN_APPLIED_PERCENT));
    let offline = parse_offline(obj, None, errors);
    let known = [
        "stages",
        "autoAdvance",
        "autoRollbackOnGateFail",
        "minAppliedPercent",
        "offlineNodes",
        "offlineAfterSeconds",
        "maxOfflinePercent",
    ];
    reject_unknown(obj, None, &known, errors);
    let plan = RolloutPlan {
        stages: stages?,
        auto_advance: auto_advance?,
        auto_rollback_on_gate_fail: auto_rollback?,
        min_applied_percent: min_applied?,
        offline: offline?,
    };
    errors.is_empty().then_some(plan)
}

fn parse_stages(value: &Value, errors: &mut Errors) -> Option<Vec<Stage>> {
    let Value::Array(items) = value else {
        errors.push(PlanError::new("stages", "must be an array"));
        return None;
    };
    let before = errors.len();
    if items.is_empty() {
        errors.push(PlanError::new("stages", "must have at least 1 stage"));
    } else if items.len() > MAX_STAGES {
        let message = format!("must have at most {MAX_STAGES} stages");
        errors.push(PlanError::new("stages", message));
    }
    let stages: Vec<Option<Stage>> = (items.iter().enumerate())
        .map(|(i, item)| parse_stage(item, &format!("stages[{i}]"), errors))
        .collect();
    let stages: Option<Vec<Stage>> = stages.into_iter().collect();
    stages.filter(|_| errors.len() == before)
}

fn parse_stage(value: &Value, field: &str, errors: &mut Errors) -> Option<Stage> {
    let obj = object(value, field, errors)?;
    let selector_field = format!("{field}.selector");
    let selector = match obj.get("selector") {
        None => missing(&selector_field, errors),
        Some(v) => parse_selector(v, &selector_field, SELECTOR_KINDS, errors),
    };
    let bake = parse_bake(
        obj.get("bakeSeconds"),
        &format!("{field}.bakeSeconds"),
        errors,
    );
    let gates = match obj.get("gates") {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(v) => parse_gates(v, &format!("{field}.gates"), errors),
    };
    let min_applied = optional_percent(obj, Some(field), "minAppliedPercent", errors);
    let offline = parse_offline(obj, Some(field), errors);
    reject_unknown(
        obj,
        Some(field),
        &[
            "selector",
            "bakeSeconds",
            "gates",
            "minAppliedPercent",
            "offlineNodes",
            "offlineAfterSeconds",
            "maxOfflinePercent",
        ],
        errors,
    );
    Some(Stage {
        selector: selector?,
        bake: bake?,
        gates: gates?,
        min_applied_percent: min_applied?,
        offline: offline?,
    })
}

/// `offlineNodes` (`wait`, `exclude`, `fail`), `offlineAfterSeconds` (1 to 86400) and
/// `maxOfflinePercent` (0 to 100) of a plan or a stage; each absent unless written.
fn parse_offline(
    obj: &Map<String, Value>,
    parent: Option<&str>,
    errors: &mut Errors,
) -> Option<OfflineSettings> {
    let name = |key: &str| parent.map_or_else(|| key.to_owned(), |p| format!("{p}.{key}"));
    let policy = match obj.get("offlineNodes") {
        None | Some(Value::Null) => Some(None),
        Some(v) => match v.as_str().and_then(OfflinePolicy::parse) {
            Some(policy) => Some(Some(policy)),
            None => fail(
                &name("offlineNodes"),
                "must be one of wait, exclude, fail",
                errors,
            ),
        },
    };
    let after_seconds = match obj.get("offlineAfterSeconds") {
        None | Some(Value::Null) => Some(None),
        Some(v) => match v.as_f64() {
            Some(s)
                if s.fract() == 0.0
                    && (1.0..=f64::from(MAX_OFFLINE_AFTER_SECONDS)).contains(&s) =>
            {
                Some(Some(s as u32))
            }
            _ => fail(
                &name("offlineAfterSeconds"),
                "must be a whole number of seconds from 1 to 86400",
                errors,
            ),
        },
    };
    let max_percent = optional_percent(obj, parent, "maxOfflinePercent", errors);
    Some(OfflineSettings {
        policy: policy?,
        after_seconds: after_seconds?,
        max_percent: max_percent?,
    })
}

const SELECTOR_KINDS: &[&str] = &["percentage", "labels", "nodeGroup"];

fn parse_selector(
    value: &Value,
    field: &str,
    kinds: &[&'static str],
    errors: &mut Errors,
) -> Option<Selector> {
    let (kind, body) = one_kind(value, field, "selector", kinds, errors)?;
    let field = format!("{field}.{kind}");
    match kind {
        "percentage" => match Percent::from_json(body) {
            Ok(p) => Some(Selector::Percentage(p)),
            Err(message) => fail(&field, message, errors),
        },
        "labels" => parse_labels(body, &field, errors).map(Selector::Labels),
        _ => non_blank_string(body, &field, errors).map(Selector::NodeGroup),
    }
}

fn parse_labels(
    value: &Value,
    field: &str,
    errors: &mut Errors,
) -> Option<BTreeMap<String, String>> {
    let obj = object(value, field, errors)?;
    if obj.is_empty() {
        return fail(field, "must have at least one label", errors);
    }
    let before = errors.len();
    let mut labels = BTreeMap::new();
    for (key, value) in obj {
        if key.is_empty() {
            errors.push(PlanError::new(field, "label keys must not be empty"));
        } else if let Value::String(value) = value {
            labels.insert(key.clone(), value.clone());
        } else {
            errors.push(PlanError::new(format!("{field}.{key}"), "must be a string"));
        }
    }
    (errors.len() == before).then_some(labels)
}

fn parse_bake(value: Option<&Value>, field: &str, errors: &mut Errors) -> Option<BakeSeconds> {
    let Some(value) = value else {
        return missing(field, errors);
    };
    // 60 and 60.0 are both a whole number of seconds.
    match value.as_f64() {
        Some(s) if s.fract() != 0.0 || !s.is_finite() => {
            fail(field, "must be a whole number of seconds", errors)
        }
        None => fail(field, "must be a whole number of seconds", errors),
        Some(s) if s < f64::from(BakeSeconds::MIN) => fail(field, "must be at least 30", errors),
        Some(s) if s > f64::from(BakeSeconds::MAX) => fail(field, "must be at most 86400", errors),
        Some(s) => BakeSeconds::new(s as u32),
    }
}

fn parse_gates(value: &Value, field: &str, errors: &mut Errors) -> Option<Vec<Gate>> {
    let Value::Array(items) = value else {
        return fail(field, "must be an array", errors);
    };
    let gates: Vec<Option<Gate>> = (items.iter().enumerate())
        .map(|(i, item)| parse_gate(item, &format!("{field}[{i}]"), errors))
        .collect();
    gates.into_iter().collect()
}

const GATE_KINDS: &[&str] = &[
    "healthWindow",
    "errorRate",
    "throughputDrop",
    "customPromQL",
];

fn parse_gate(value: &Value, field: &str, errors: &mut Errors) -> Option<Gate> {
    let (kind, body) = one_kind(value, field, "gate", GATE_KINDS, errors)?;
    let field = format!("{field}.{kind}");
    if kind == "healthWindow" {
        // `{}`, `null` and `true` all mean "this gate, no settings".
        return match body {
            Value::Null | Value::Bool(true) => Some(Gate::HealthWindow),
            Value::Object(settings) if settings.is_empty() => Some(Gate::HealthWindow),
            _ => fail(&field, "takes no settings; use {}", errors),
        };
    }
    let settings = object(body, &field, errors)?;
    let watch = parse_watch(settings, &field, errors);
    let gate = match kind {
        "errorRate" => {
            let max = percent_bound(settings, &field, "maxPercent", errors);
            let scope = parse_scope(settings.get("scope"), &field, errors);
            let known = [
                "maxPercent",
                "scope",
                WATCH_FIELDS[0],
                WATCH_FIELDS[1],
                WATCH_FIELDS[2],
            ];
            reject_unknown(settings, Some(&field), &known, errors);
            Gate::ErrorRate {
                max_percent: max?,
                scope: scope?,
                watch: watch?,
            }
        }
        "throughputDrop" => {
            let max = percent_bound(settings, &field, "maxDropPercent", errors);
            let known = [
                "maxDropPercent",
                WATCH_FIELDS[0],
                WATCH_FIELDS[1],
                WATCH_FIELDS[2],
            ];
            reject_unknown(settings, Some(&field), &known, errors);
            Gate::ThroughputDrop {
                max_drop_percent: max?,
                watch: watch?,
            }
        }
        _ => {
            let query = match settings.get("query") {
                None => missing(&format!("{field}.query"), errors),
                Some(v) => non_blank_string(v, &format!("{field}.query"), errors),
            };
            let comparator = parse_comparator(settings.get("comparator"), &field, errors);
            let threshold = finite_number(settings, &field, "threshold", errors);
            let known = [
                "query",
                "comparator",
                "threshold",
                WATCH_FIELDS[0],
                WATCH_FIELDS[1],
                WATCH_FIELDS[2],
            ];
            reject_unknown(settings, Some(&field), &known, errors);
            Gate::CustomPromQl {
                query: query?,
                comparator: comparator?,
                threshold: threshold?,
                watch: watch?,
            }
        }
    };
    Some(gate)
}

/// The settings every signal gate takes, all optional.
const WATCH_FIELDS: [&str; 3] = ["intervalSeconds", "failureLimit", "onNoData"];

fn parse_watch(obj: &Map<String, Value>, gate: &str, errors: &mut Errors) -> Option<Watch> {
    let defaults = Watch::default();
    let interval = optional_whole(
        obj,
        gate,
        WATCH_FIELDS[0],
        (Watch::MIN_INTERVAL_SECONDS, BakeSeconds::MAX),
        defaults.interval_seconds,
        errors,
    );
    let failure_limit = optional_whole(
        obj,
        gate,
        WATCH_FIELDS[1],
        (1, Watch::MAX_FAILURE_LIMIT),
        defaults.failure_limit,
        errors,
    );
    let field = format!("{gate}.{}", WATCH_FIELDS[2]);
    let on_no_data = match obj.get(WATCH_FIELDS[2]).map(|v| (v, v.as_str())) {
        None | Some((Value::Null, _)) => Some(defaults.on_no_data),
        Some((_, Some("fail"))) => Some(OnNoData::Fail),
        Some((_, Some("hold"))) => Some(OnNoData::Hold),
        Some(_) => fail(&field, "must be \"fail\" or \"hold\"", errors),
    };
    Some(Watch {
        interval_seconds: interval?,
        failure_limit: failure_limit?,
        on_no_data: on_no_data?,
    })
}

fn parse_scope(value: Option<&Value>, gate: &str, errors: &mut Errors) -> Option<Scope> {
    match value.map(|v| (v, v.as_str())) {
        None | Some((Value::Null, _)) => Some(Scope::default()),
        Some((_, Some("cumulative"))) => Some(Scope::Cumulative),
        Some((_, Some("stage"))) => Some(Scope::Stage),
        Some(_) => fail(
            &format!("{gate}.scope"),
            "must be \"cumulative\" or \"stage\"",
            errors,
        ),
    }
}

/// An optional whole number within `min..=max`; absent or `null` takes `default`.
fn optional_whole(
    obj: &Map<String, Value>,
    gate: &str,
    key: &str,
    (min, max): (u32, u32),
    default: u32,
    errors: &mut Errors,
) -> Option<u32> {
    let field = format!("{gate}.{key}");
    let value = match obj.get(key) {
        None | Some(Value::Null) => return Some(default),
        Some(value) => value.as_f64(),
    };
    match value {
        Some(n) if n.is_finite() && n.fract() == 0.0 => {
            if n < f64::from(min) {
                fail(&field, &format!("must be at least {min}"), errors)
            } else if n > f64::from(max) {
                fail(&field, &format!("must be at most {max}"), errors)
            } else {
                Some(n as u32)
            }
        }
        _ => fail(&field, "must be a whole number", errors),
    }
}

fn parse_comparator(value: Option<&Value>, gate: &str, errors: &mut Errors) -> Option<Comparator> {
    let field = format!("{gate}.comparator");
    match value.and_then(Value::as_str).and_then(Comparator::parse) {
        Some(comparator) => Some(comparator),
        None if value.is_none() => missing(&field, errors),
        None => fail(&field, "must be one of lt, lte, gt, gte", errors),
    }
}

fn percent_bound(
    obj: &Map<String, Value>,
    gate: &str,
    key: &str,
    errors: &mut Errors,
) -> Option<f64> {
    let value = finite_number(obj, gate, key, errors)?;
    if (0.0..=100.0).contains(&value) {
        Some(value)
    } else {
        fail(
            &format!("{gate}.{key}"),
            "must be between 0 and 100",
            errors,
        )
    }
}

fn finite_number(
    obj: &Map<String, Value>,
    gate: &str,
    key: &str,
    errors: &mut Errors,
) -> Option<f64> {
    let field = format!("{gate}.{key}");
    match obj.get(key) {
        None => missing(&field, errors),
        Some(v) => match v.as_f64().filter(|f| f.is_finite()) {
            Some(f) => Some(f),
            None => fail(&field, "must be a finite number", errors),
        },
    }
}

// ---- small JSON readers shared by the parsers above ----

/// A selector or gate is an object with exactly one key naming its kind.
fn one_kind<'v>(
    value: &'v Value,
    field: &str,
    noun: &str,
    kinds: &[&'static str],
    errors: &mut Errors,
) -> Option<(&'static str, &'v Value)> {
    let obj = object(value, field, errors)?;
    let expected = kinds.join(", ");
    let mut entries = obj.iter();
    let (Some((key, body)), None) = (entries.next(), entries.next()) else {
        return fail(
            field,
            &format!("must have exactly one of {expected}"),
            errors,
        );
    };
    match kinds.iter().find(|kind| *kind == key) {
        Some(kind) => Some((kind, body)),
        None => {
            let message = format!("unknown {noun} kind \"{key}\"; expected one of {expected}");
            fail(field, &message, errors)
        }
    }
}

fn object<'v>(
    value: &'v Value,
    field: &str,
    errors: &mut Errors,
) -> Option<&'v Map<String, Value>> {
    match value {
        Value::Object(obj) => Some(obj),
        _ => fail(field, "must be an object", errors),
    }
}

fn non_blank_string(value: &Value, field: &str, errors: &mut Errors) -> Option<String> {
    match value.as_str() {
        Some(text) if !text.trim().is_empty() => Some(text.to_owned()),
        _ => fail(field, "must be a non-empty string", errors),
    }
}

/// An optional percentage from 0 to 100; `Some(None)` when absent or `null`.
fn optional_percent(
    obj: &Map<String, Value>,
    parent: Option<&str>,
    key: &str,
    errors: &mut Errors,
) -> Option<Option<f64>> {
    let field = parent.map_or_else(|| key.to_owned(), |parent| format!("{parent}.{key}"));
    match obj.get(key) {
        None | Some(Value::Null) => Some(None),
        Some(v) => match v.as_f64().filter(|f| f.is_finite()) {
            Some(f) if (0.0..=100.0).contains(&f) => Some(Some(f)),
            _ => fail(&field, "must be a number from 0 to 100", errors),
        },
    }
}

/// Absent or `null` takes the SPEC default, `true`.
fn optional_bool(obj: &Map<String, Value>, key: &str, errors: &mut Errors) -> Option<bool> {
    match obj.get(key) {
        None | Some(Value::Null) => Some(true),
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => fail(key, "must be true or false", errors),
    }
}

fn reject_unknown(
    obj: &Map<String, Value>,
    parent: Option<&str>,
    known: &[&str],
    errors: &mut Errors,
) {
    for key in obj.keys().filter(|key| !known.contains(&key.as_str())) {
        let field = parent.map_or_else(|| key.clone(), |parent| format!("{parent}.{key}"));
        errors.push(PlanError::new(field, "is not a known field"));
    }
}

fn missing<T>(field: &str, errors: &mut Errors) -> Option<T> {
    fail(field, "is required", errors)
}

fn fail<T>(field: &str, message: &str, errors: &mut Errors) -> Option<T> {
    errors.push(PlanError::new(field, message));
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Three valid stages; stage 1 has one gate, so `/stages/1/gates/0` can be replaced.
    fn base() -> Value {
        let stage = json!({"selector": {"percentage": 10}, "bakeSeconds": 60, "gates": []});
        let mut plan = json!({ "stages": [stage.clone(), stage.clone(), stage] });
        plan["stages"][1]["gates"] = json!([{"healthWindow": {}}]);
        plan
    }

    /// The base plan with the value at a JSON pointer replaced.
    fn with(pointer: &str, value: Value) -> Value {
        let mut plan = base();
        *plan.pointer_mut(pointer).expect("pointer exists") = value;
        plan
    }

    /// The base plan without the field at `parent` + `key`.
    fn without(parent: &str, key: &str) -> Value {
        let mut plan = base();
        let obj = plan.pointer_mut(parent).and_then(Value::as_object_mut);
        obj.expect("object").remove(key);
        plan
    }

    fn refusal(plan: Value) -> String {
        RolloutPlan::parse(&plan).expect_err("refused").to_string()
    }

    fn assert_refusals(cases: &[(&str, Value, &str)]) {
        for (pointer, value, expected) in cases {
            assert_eq!(
                refusal(with(pointer, value.clone())),
                *expected,
                "{pointer} = {value}"
            );
        }
    }

    fn assert_accepted(cases: &[(&str, Value)]) {
        for (pointer, value) in cases {
            let plan = with(pointer, value.clone());
            assert!(RolloutPlan::parse(&plan).is_ok(), "{pointer} = {value}");
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(plan: Value) -> RolloutPlan {
        RolloutPlan::parse(&plan).expect("valid plan")
    }

    #[test]
    fn a_minimal_plan_parses_with_both_toggles_defaulting_to_true() {
        let plan = parse(json!({"stages": [{"selector": {"percentage": 7}, "bakeSeconds": 30}]}));
        assert!(plan.auto_advance() && plan.auto_rollback_on_gate_fail());
        assert_eq!(plan.stages()[0].bake.get(), 30);
        assert!(plan.stages()[0].gates.is_empty());
    }

    #[test]
    fn every_selector_and_gate_kind_parses_into_typed_values() {
        let plan = parse(json!({
            "stages": [
                {"selector": {"percentage": 12.25}, "bakeSeconds": 86400, "gates": [
                    {"healthWindow": {}}, {"errorRate": {"maxPercent": 1.5}},
                ]},
                {"selector": {"labels": {"wave": "a"}}, "bakeSeconds": 60, "gates": [
                    {"throughputDrop": {"maxDropPercent": 20}},
                    {"customPromQL": {"query": "up", "comparator": "gte", "threshold": 1}},
                ]},
                {"selector": {"nodeGroup": "ng_1"}, "bakeSeconds": 60.0, "gates": null},
            ],
            "autoAdvance": false,
            "autoRollbackOnGateFail": false,
        }));
        let [first, second, third] = plan.stages() else {
            panic!("three stages")
        };
        let p1225 = Percent::from_hundredths(1225).expect("in range");
        assert_eq!(first.selector, Selector::Percentage(p1225));
        let error_rate = Gate::ErrorRate {
            max_percent: 1.5,
            scope: Scope::Cumulative,
            watch: Watch::default(),
        };
        assert_eq!(first.gates, [Gate::HealthWindow, error_rate]);
        assert_eq!(second.selector, Selector::Labels(labels(&[("wave", "a")])));
        let promql = Gate::CustomPromQl {
            query: "up".into(),
            comparator: Comparator::Gte,
            threshold: 1.0,
            watch: Watch::default(),
        };
        let drop = Gate::ThroughputDrop {
            max_drop_percent: 20.0,
            watch: Watch::default(),
        };
        assert_eq!(second.gates, [drop, promql]);
        assert_eq!(third.selector, Selector::NodeGroup("ng_1".into()));
        assert!(third.gates.is_empty());
        assert!(!plan.auto_advance() && !plan.auto_rollback_on_gate_fail());
    }

    #[test]
    fn a_plan_must_be_an_object_with_one_to_twenty_stages() {
        let stage = base()["stages"][0].clone();
        assert_refusals(&[
            ("", json!([]), "rolloutPlan: must be an object"),
            ("/stages", json!({}), "stages: must be an array"),
            ("/stages", json!([]), "stages: must have at least 1 stage"),
            (
                "/stages",
                json!(vec![stage.clone(); 21]),
                "stages: must have at most 20 stages",
            ),
            ("/stages/0", json!(5), "stages[0]: must be an object"),
        ]);
        assert_accepted(&[("/stages", json!(vec![stage; 20]))]);
        assert_eq!(refusal(without("", "stages")), "stages: is required");
    }

    #[test]
    fn bake_seconds_must_be_a_whole_number_from_thirty_seconds_to_a_day() {
        assert_refusals(&[
            (
                "/stages/2/bakeSeconds",
                json!(29),
                "stages[2].bakeSeconds: must be at least 30",
            ),
            (
                "/stages/2/bakeSeconds",
                json!(-60),
                "stages[2].bakeSeconds: must be at least 30",
            ),
            (
                "/stages/2/bakeSeconds",
                json!(86401),
                "stages[2].bakeSeconds: must be at most 86400",
            ),
            (
                "/stages/2/bakeSeconds",
                json!(1e300),
                "stages[2].bakeSeconds: must be at most 86400",
            ),
            (
                "/stages/2/bakeSeconds",
                json!(45.5),
                "stages[2].bakeSeconds: must be a whole number of seconds",
            ),
            (
                "/stages/2/bakeSeconds",
                json!("60"),
                "stages[2].bakeSeconds: must be a whole number of seconds",
            ),
        ]);
        assert_accepted(&[
            ("/stages/2/bakeSeconds", json!(30)),
            ("/stages/2/bakeSeconds", json!(86400)),
            ("/stages/2/bakeSeconds", json!(120.0)),
        ]);
        let missing = without("/stages/1", "bakeSeconds");
        assert_eq!(refusal(missing), "stages[1].bakeSeconds: is required");
    }

    #[test]
    fn percentages_must_be_above_zero_at_most_one_hundred_with_two_decimals() {
        let at = "/stages/0/selector/percentage";
        let field = "stages[0].selector.percentage";
        let cases = [
            (json!(0), "must be greater than 0"),
            (json!(-1), "must be greater than 0"),
            (json!(100.5), "must be at most 100"),
            (json!(12.345), "must have at most two decimal places"),
            (json!("10"), "must be a number"),
        ];
        for (value, message) in cases {
            assert_eq!(refusal(with(at, value)), format!("{field}: {message}"));
        }
        assert_accepted(&[
            (at, json!(7)),
            (at, json!(0.5)),
            (at, json!(12.25)),
            (at, json!(100)),
        ]);
    }

    #[test]
    fn a_selector_names_exactly_one_known_kind() {
        let expected = "percentage, labels, nodeGroup";
        assert_refusals(&[
            (
                "/stages/0/selector",
                json!({}),
                &format!("stages[0].selector: must have exactly one of {expected}"),
            ),
            (
                "/stages/0/selector",
                json!({"percentage": 5, "nodeGroup": "g"}),
                &format!("stages[0].selector: must have exactly one of {expected}"),
            ),
            (
                "/stages/0/selector",
                json!({"hostname": "a"}),
                &format!(
                    "stages[0].selector: unknown selector kind \"hostname\"; \
                     expected one of {expected}"
                ),
            ),
            (
                "/stages/0/selector",
                json!("10%"),
                "stages[0].selector: must be an object",
            ),
        ]);
        let missing = without("/stages/0", "selector");
        assert_eq!(refusal(missing), "stages[0].selector: is required");
    }

    #[test]
    fn label_selectors_need_at_least_one_pair_of_strings() {
        let at = "/stages/0/selector";
        assert_refusals(&[
            (
                at,
                json!({"labels": {}}),
                "stages[0].selector.labels: must have at least one label",
            ),
            (
                at,
                json!({"labels": {"": "a"}}),
                "stages[0].selector.labels: label keys must not be empty",
            ),
            (
                at,
                json!({"labels": {"wave": 1}}),
                "stages[0].selector.labels.wave: must be a string",
            ),
            (
                at,
                json!({"labels": []}),
                "stages[0].selector.labels: must be an object",
            ),
        ]);
        // An empty value is a criterion like any other: the label must be present and empty.
        assert_accepted(&[(at, json!({"labels": {"tier": ""}}))]);
    }

    #[test]
    fn a_node_group_selector_needs_a_non_empty_id() {
        let message = "stages[0].selector.nodeGroup: must be a non-empty string";
        let at = "/stages/0/selector";
        assert_refusals(&[
            (at, json!({"nodeGroup": ""}), message),
            (at, json!({"nodeGroup": "  "}), message),
            (at, json!({"nodeGroup": 7}), message),
        ]);
    }

    #[test]
    fn the_health_window_gate_accepts_an_empty_object_null_or_true_only() {
        let at = "/stages/1/gates/0";
        assert_accepted(&[
            (at, json!({"healthWindow": {}})),
            (at, json!({"healthWindow": null})),
            (at, json!({"healthWindow": true})),
        ]);
        let message = "stages[1].gates[0].healthWindow: takes no settings; use {}";
        assert_refusals(&[
            (at, json!({"healthWindow": false}), message),
            (at, json!({"healthWindow": {"minutes": 5}}), message),
        ]);
    }

    #[test]
    fn unknown_or_ambiguous_gates_are_refused() {
        let kinds = "healthWindow, errorRate, throughputDrop, customPromQL";
        assert_refusals(&[
            (
                "/stages/1/gates/0",
                json!({"latency": {}}),
                &format!(
                    "stages[1].gates[0]: unknown gate kind \"latency\"; expected one of {kinds}"
                ),
            ),
            (
                "/stages/1/gates/0",
                json!({"healthWindow": {}, "errorRate": {"maxPercent": 1}}),
                &format!("stages[1].gates[0]: must have exactly one of {kinds}"),
            ),
            (
                "/stages/1/gates",
                json!({}),
                "stages[1].gates: must be an array",
            ),
        ]);
    }

    #[test]
    fn error_rate_and_throughput_drop_limits_are_percentages_from_zero_to_one_hundred() {
        let cases = [
            (
                json!({"errorRate": {"maxPercent": -0.1}}),
                "errorRate.maxPercent: must be between 0 and 100",
            ),
            (
                json!({"errorRate": {"maxPercent": 100.1}}),
                "errorRate.maxPercent: must be between 0 and 100",
            ),
            (
                json!({"errorRate": {"maxPercent": "1"}}),
                "errorRate.maxPercent: must be a finite number",
            ),
            (
                json!({"errorRate": {}}),
                "errorRate.maxPercent: is required",
            ),
            (json!({"errorRate": 1}), "errorRate: must be an object"),
            (
                json!({"errorRate": {"maxPercent": 1, "window": 5}}),
                "errorRate.window: is not a known field",
            ),
            (
                json!({"throughputDrop": {"maxDropPercent": 101}}),
                "throughputDrop.maxDropPercent: must be between 0 and 100",
            ),
            (
                json!({"throughputDrop": {}}),
                "throughputDrop.maxDropPercent: is required",
            ),
        ];
        for (gate, message) in cases {
            let expected = format!("stages[1].gates[0].{message}");
            assert_eq!(refusal(with("/stages/1/gates/0", gate)), expected);
        }
        let at = "/stages/1/gates/0";
        assert_accepted(&[
            (at, json!({"errorRate": {"maxPercent": 0}})),
            (at, json!({"errorRate": {"maxPercent": 100}})),
            (at, json!({"throughputDrop": {"maxDropPercent": 0}})),
            (at, json!({"throughputDrop": {"maxDropPercent": 100}})),
        ]);
    }

    #[test]
    fn a_custom_promql_gate_needs_a_query_a_known_comparator_and_a_finite_threshold() {
        let gate = |settings: Value| with("/stages/1/gates/0", json!({ "customPromQL": settings }));
        let field = "stages[1].gates[0].customPromQL";
        let cases = [
            (
                json!({"query": "up", "comparator": "eq", "threshold": 1}),
                "comparator: must be one of lt, lte, gt, gte",
            ),
            (
                json!({"query": "up", "threshold": 1}),
                "comparator: is required",
            ),
            (
                json!({"query": " ", "comparator": "lt", "threshold": 1}),
                "query: must be a non-empty string",
            ),
            (
                json!({"comparator": "lt", "threshold": 1}),
                "query: is required",
            ),
            (
                json!({"query": "up", "comparator": "lt", "threshold": "high"}),
                "threshold: must be a finite number",
            ),
            (
                json!({"query": "up", "comparator": "lt"}),
                "threshold: is required",
            ),
        ];
        for (settings, message) in cases {
            assert_eq!(refusal(gate(settings)), format!("{field}.{message}"));
        }
    }

    #[test]
    fn signal_gates_take_a_check_interval_a_failure_limit_a_no_data_policy_and_a_scope() {
        let at = "/stages/1/gates/0";
        let gate = |settings: Value| parse(with(at, settings)).stages()[1].gates[0].clone();
        let watch = Watch {
            interval_seconds: 10,
            failure_limit: 3,
            on_no_data: OnNoData::Hold,
        };
        let settings = json!({"intervalSeconds": 10, "failureLimit": 3, "onNoData": "hold"});
        let mut error_rate = settings.clone();
        error_rate["maxPercent"] = json!(2);
        error_rate["scope"] = json!("stage");
        assert_eq!(
            gate(json!({ "errorRate": error_rate })),
            Gate::ErrorRate {
                max_percent: 2.0,
                scope: Scope::Stage,
                watch,
            }
        );
        let mut promql = settings;
        promql["query"] = json!("up");
        promql["comparator"] = json!("lt");
        promql["threshold"] = json!(1);
        assert_eq!(gate(json!({ "customPromQL": promql })).watch(), Some(watch));
        let defaults = gate(json!({"throughputDrop": {"maxDropPercent": 5, "onNoData": null}}));
        assert_eq!(defaults.watch(), Some(Watch::default()));
        assert_eq!(Gate::HealthWindow.watch(), None);

        let field = "stages[1].gates[0].errorRate";
        let refused = |extra: Value| {
            let mut settings = json!({"maxPercent": 1});
            settings
                .as_object_mut()
                .expect("object")
                .extend(extra.as_object().expect("object").clone());
            refusal(with(at, json!({ "errorRate": settings })))
        };
        let cases = [
            (
                json!({"intervalSeconds": 9}),
                "intervalSeconds: must be at least 10",
            ),
            (
                json!({"intervalSeconds": 86401}),
                "intervalSeconds: must be at most 86400",
            ),
            (
                json!({"intervalSeconds": 12.5}),
                "intervalSeconds: must be a whole number",
            ),
            (
                json!({"failureLimit": 0}),
                "failureLimit: must be at least 1",
            ),
            (
                json!({"failureLimit": "3"}),
                "failureLimit: must be a whole number",
            ),
            (
                json!({"onNoData": "skip"}),
                "onNoData: must be \"fail\" or \"hold\"",
            ),
            (
                json!({"scope": "fleet"}),
                "scope: must be \"cumulative\" or \"stage\"",
            ),
        ];
        for (extra, message) in cases {
            assert_eq!(refused(extra), format!("{field}.{message}"));
        }
        assert_eq!(
            refusal(with(
                at,
                json!({"throughputDrop": {"maxDropPercent": 1, "scope": "stage"}})
            )),
            "stages[1].gates[0].throughputDrop.scope: is not a known field"
        );
    }

    #[test]
    fn min_applied_percent_is_a_plan_default_a_stage_may_override() {
        let mut plan = base();
        plan["minAppliedPercent"] = json!(90);
        plan["stages"][2]["minAppliedPercent"] = json!(0);
        let parsed = parse(plan);
        assert_eq!(parsed.min_applied_percent(0), 90.0);
        assert_eq!(parsed.min_applied_percent(2), 0.0);
        assert_eq!(parse(base()).min_applied_percent(1), 100.0);
        let mut plan = base();
        plan["stages"][1]["minAppliedPercent"] = json!(101);
        assert_eq!(
            refusal(plan),
            "stages[1].minAppliedPercent: must be a number from 0 to 100"
        );
        let mut plan = base();
        plan["minAppliedPercent"] = json!("all");
        assert_eq!(
            refusal(plan),
            "minAppliedPercent: must be a number from 0 to 100"
        );
    }

    #[test]
    fn offline_fields_are_plan_defaults_a_stage_may_override_and_are_written_only_when_set() {
        use crate::offline::{OfflinePolicy, DEFAULT_MAX_OFFLINE_PERCENT};
        let mut plan = base();
        plan["offlineNodes"] = json!("exclude");
        plan["maxOfflinePercent"] = json!(25);
        plan["stages"][1]["offlineNodes"] = json!("fail");
        plan["stages"][1]["offlineAfterSeconds"] = json!(120);
        let parsed = parse(plan);
        let first = parsed.offline_rule(0, OfflinePolicy::Wait);
        assert_eq!(first.policy, OfflinePolicy::Exclude);
        assert_eq!((first.after_seconds, first.max_percent), (None, 25.0));
        let second = parsed.offline_rule(1, OfflinePolicy::Wait);
        assert_eq!(second.policy, OfflinePolicy::Fail);
        assert_eq!(
            (second.after_seconds, second.max_percent),
            (Some(120), 25.0)
        );
        let json = parsed.to_json();
        assert_eq!(json["offlineNodes"], "exclude");
        assert_eq!(json["stages"][1]["offlineAfterSeconds"], 120);
        assert!(json["stages"][0].get("offlineNodes").is_none());

        let plain = parse(base());
        let server_default = OfflinePolicy::Exclude;
        assert_eq!(
            plain.offline_rule(0, server_default).policy,
            OfflinePolicy::Exclude
        );
        assert_eq!(
            plain.offline_rule(0, OfflinePolicy::Wait).policy,
            OfflinePolicy::Wait
        );
        assert_eq!(
            plain.offline_rule(0, server_default).max_percent,
            DEFAULT_MAX_OFFLINE_PERCENT
        );
        assert!(plain.to_json().get("offlineNodes").is_none());
    }

    #[test]
    fn bad_offline_fields_are_refused_naming_them() {
        let cases = [
            (
                None,
                "offlineNodes",
                json!("skip"),
                "offlineNodes: must be one of wait, exclude, fail",
            ),
            (
                Some(0),
                "offlineNodes",
                json!(true),
                "stages[0].offlineNodes: must be one of wait, exclude, fail",
            ),
            (
                None,
                "offlineAfterSeconds",
                json!(0),
                "offlineAfterSeconds: must be a whole number of seconds from 1 to 86400",
            ),
            (
                Some(2),
                "offlineAfterSeconds",
                json!(1.5),
                "stages[2].offlineAfterSeconds: must be a whole number of seconds from 1 to 86400",
            ),
            (
                None,
                "maxOfflinePercent",
                json!(150),
                "maxOfflinePercent: must be a number from 0 to 100",
            ),
        ];
        for (stage, key, value, expected) in cases {
            let mut plan = base();
            match stage {
                Some(i) => plan["stages"][i][key] = value,
                None => plan[key] = value,
            }
            assert_eq!(refusal(plan), expected);
        }
    }

    #[test]
    fn unknown_fields_are_refused_so_a_typo_cannot_silently_keep_a_default() {
        let mut plan = base();
        plan["autoAdvanced"] = json!(false);
        assert_eq!(refusal(plan), "autoAdvanced: is not a known field");
        let mut plan = base();
        plan["stages"][0]["bake"] = json!(60);
        assert_eq!(refusal(plan), "stages[0].bake: is not a known field");
    }

    #[test]
    fn the_toggles_must_be_booleans_and_null_means_the_default() {
        let mut plan = base();
        plan["autoRollbackOnGateFail"] = json!("no");
        assert_eq!(
            refusal(plan.clone()),
            "autoRollbackOnGateFail: must be true or false"
        );
        plan["autoRollbackOnGateFail"] = json!(null);
        plan["autoAdvance"] = json!(null);
        let parsed = parse(plan);
        assert!(parsed.auto_advance() && parsed.auto_rollback_on_gate_fail());
    }

    #[test]
    fn the_first_error_in_document_order_is_reported_and_validate_all_lists_every_one() {
        let mut plan = with("/stages/0/selector/percentage", json!(0));
        plan["stages"][0]["bakeSeconds"] = json!(10);
        plan["stages"][1]["gates"][0] = json!({"nope": {}});
        plan["autoAdvance"] = json!(3);
        assert_eq!(
            refusal(plan.clone()),
            "stages[0].selector.percentage: must be greater than 0"
        );
        let all: Vec<String> = RolloutPlan::validate_all(&plan)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            all,
            [
                "stages[0].selector.percentage: must be greater than 0",
                "stages[0].bakeSeconds: must be at least 30",
                "stages[1].gates[0]: unknown gate kind \"nope\"; \
                 expected one of healthWindow, errorRate, throughputDrop, customPromQL",
                "autoAdvance: must be true or false",
            ]
        );
        assert!(RolloutPlan::validate_all(&base()).is_empty());
    }

    #[test]
    fn a_canary_selector_is_labels_or_percentage_and_names_its_field() {
        let read =
            |v: Value| parse_canary_selector(&v, "canarySelector").map_err(|e| e.to_string());
        let half = Percent::from_hundredths(50).expect("in range");
        assert_eq!(
            read(json!({"percentage": 0.5})),
            Ok(CanarySelector::Percentage(half))
        );
        assert_eq!(
            read(json!({"labels": {"wave": "a"}})),
            Ok(CanarySelector::Labels(labels(&[("wave", "a")])))
        );
        assert_eq!(
            read(json!({"nodeGroup": "g"})),
            Err("canarySelector: unknown selector kind \"nodeGroup\"; \
                 expected one of percentage, labels"
                .into())
        );
        assert_eq!(
            read(json!({"percentage": 101})),
            Err("canarySelector.percentage: must be at most 100".into())
        );
    }
}
