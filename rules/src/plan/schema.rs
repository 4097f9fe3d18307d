//! The JSON Schema of a rollout plan and its selectors, for the API description
//! (`GET /api/openapi.json`).
//!
//! A plan is read by hand (`parse.rs`) so that every refusal names its field, so serde cannot
//! describe it. The `*Shape` types below exist only to describe that wire form to schemars,
//! field by field as `parse.rs` reads it; the tests at the bottom hold the two together: every
//! canonical plan validates against the schema, and so do the plans the parser accepts in
//! its own tests, while plans with a wrong type or an unknown field are refused by both.
//! Rules that need more than one field (at most two decimals, 1..=20 stages of known node
//! groups) stay the parser's alone.
//!
//! [`Unparsed`] carries such JSON through a server function's arguments untouched, with the
//! schema of what it will be parsed into.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CanarySelector, RolloutPlan, Selector};

/// JSON sent for a `T` and read later by `T`'s own parser ([`RolloutPlan::parse`],
/// [`super::parse_canary_selector`]), so that a refusal names its field rather than failing
/// as an argument that does not decode. On the wire it is the JSON itself; its schema is
/// `T`'s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Unparsed<T> {
    pub json: Value,
    #[serde(skip)]
    parsed_as: PhantomData<fn() -> T>,
}

impl<T> Unparsed<T> {
    pub fn new(json: Value) -> Unparsed<T> {
        Unparsed {
            json,
            parsed_as: PhantomData,
        }
    }
}

impl<T: JsonSchema> JsonSchema for Unparsed<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

/// Describes the wire form [`RolloutPlan::parse`] reads and [`RolloutPlan::to_json`] writes.
impl JsonSchema for RolloutPlan {
    fn schema_name() -> Cow<'static, str> {
        "RolloutPlan".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        PlanShape::json_schema(generator)
    }
}

/// A stage's selector: exactly one of `percentage`, `labels` or `nodeGroup`.
impl JsonSchema for Selector {
    fn schema_name() -> Cow<'static, str> {
        "Selector".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        SelectorShape::json_schema(generator)
    }
}

/// A plan-less canary's selector: exactly one of `percentage` or `labels`.
impl JsonSchema for CanarySelector {
    fn schema_name() -> Cow<'static, str> {
        "CanarySelector".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        CanarySelectorShape::json_schema(generator)
    }
}

/// A rollout plan: the stages a release walks through, in order. See docs/rollouts.md.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PlanShape {
    /// 1 to 20 stages.
    #[schemars(length(min = 1, max = 20))]
    stages: Vec<StageShape>,
    /// Whether the scheduler advances a stage whose gates pass when its bake ends (default
    /// true); otherwise the release holds for an operator.
    auto_advance: Option<bool>,
    /// Whether a failing gate rolls the release back by itself (default true); otherwise the
    /// release holds.
    auto_rollback_on_gate_fail: Option<bool>,
    /// The share of a stage's targeted nodes that must report running the canary before the
    /// stage passes (default 100).
    #[schemars(range(min = 0, max = 100))]
    min_applied_percent: Option<f64>,
    /// What a targeted node that stopped talking does to its stage: `exclude` (the default,
    /// unless the server's `VF_OFFLINE_NODES_DEFAULT` says otherwise) leaves it out of proof
    /// of apply and the gate inputs, `wait` keeps it in every count, `fail` fails the stage.
    /// Written only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    offline_nodes: Option<OfflineNodesShape>,
    /// Seconds of silence after which a node is offline (default: 3 of its poll intervals).
    #[schemars(range(min = 1, max = 86400))]
    #[serde(skip_serializing_if = "Option::is_none")]
    offline_after_seconds: Option<u32>,
    /// With `exclude`, the most of a stage's nodes that may be offline before the stage holds
    /// instead (default 10).
    #[schemars(range(min = 0, max = 100))]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_offline_percent: Option<f64>,
}

/// `offlineNodes`: what an offline targeted node does to its stage.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
enum OfflineNodesShape {
    Wait,
    Exclude,
    Fail,
}

/// One step of a plan: who joins, how long they bake, what must hold afterwards.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "Stage")]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StageShape {
    selector: Selector,
    /// Seconds the stage bakes before its gates decide.
    #[schemars(range(min = 30, max = 86400))]
    bake_seconds: u32,
    /// Checked during and at the end of the bake; none means the stage passes when its bake
    /// ends.
    gates: Option<Vec<GateShape>>,
    /// Overrides the plan's `minAppliedPercent` for this stage (written only when set).
    #[schemars(range(min = 0, max = 100))]
    #[serde(skip_serializing_if = "Option::is_none")]
    min_applied_percent: Option<f64>,
    /// Overrides the plan's `offlineNodes` for this stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    offline_nodes: Option<OfflineNodesShape>,
    /// Overrides the plan's `offlineAfterSeconds` for this stage.
    #[schemars(range(min = 1, max = 86400))]
    #[serde(skip_serializing_if = "Option::is_none")]
    offline_after_seconds: Option<u32>,
    /// Overrides the plan's `maxOfflinePercent` for this stage.
    #[schemars(range(min = 0, max = 100))]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_offline_percent: Option<f64>,
}

/// Which nodes a stage adds: exactly one of `percentage`, `labels` or `nodeGroup`.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
enum SelectorShape {
    Percentage(PercentShape),
    /// Nodes carrying every pair (at least one pair; keys not blank).
    Labels(LabelsShape),
    /// The id of a node group of the release's environment.
    NodeGroup(String),
}

/// Which nodes a plan-less canary targets: exactly one of `percentage` or `labels`.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
enum CanarySelectorShape {
    Percentage(PercentShape),
    Labels(LabelsShape),
}

/// A share of the fleet in percent: more than 0, at most 100, at most two decimals.
/// Larger shares of one release contain its smaller ones.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "Percent")]
#[schemars(extend("exclusiveMinimum" = 0, "maximum" = 100))]
struct PercentShape(f64);

#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "Labels")]
#[schemars(extend("minProperties" = 1))]
struct LabelsShape(BTreeMap<String, String>);

/// A check on a stage: exactly one of `healthWindow`, `errorRate`, `throughputDrop`,
/// `customPromQL`.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "Gate")]
#[serde(rename_all = "camelCase")]
enum GateShape {
    /// Passes when the bake ends with the canary nodes healthy; takes no settings (`{}`).
    HealthWindow(Option<NoSettings>),
    ErrorRate(ErrorRateShape),
    ThroughputDrop(ThroughputDropShape),
    #[serde(rename = "customPromQL")]
    CustomPromQl(CustomPromQlShape),
}

#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "NoSettings")]
#[serde(deny_unknown_fields)]
struct NoSettings {}

/// Fails when the canary nodes' errors exceed `maxPercent` of their events.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "ErrorRateGate")]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ErrorRateShape {
    #[schemars(range(min = 0, max = 100))]
    max_percent: f64,
    /// `cumulative` (every node a started stage targeted, the default) or `stage` (the
    /// nodes this stage added).
    scope: Option<ScopeShape>,
    #[serde(flatten)]
    watch: WatchShape,
}

/// Fails when the canary's throughput fell more than `maxDropPercent` below the baseline
/// recorded at rollout start.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "ThroughputDropGate")]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ThroughputDropShape {
    #[schemars(range(min = 0, max = 100))]
    max_drop_percent: f64,
    #[serde(flatten)]
    watch: WatchShape,
}

/// Passes while `query`, which must give exactly one number, compares to `threshold`.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "CustomPromQlGate")]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CustomPromQlShape {
    /// A PromQL query, not blank.
    #[schemars(length(min = 1))]
    query: String,
    comparator: ComparatorShape,
    threshold: f64,
    #[serde(flatten)]
    watch: WatchShape,
}

/// How a signal gate is checked during the bake.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
struct WatchShape {
    /// Seconds between checks (default 30).
    #[schemars(range(min = 10, max = 86400))]
    interval_seconds: Option<u32>,
    /// Consecutive failing checks that fail the gate (default 1).
    #[schemars(range(min = 1, max = 1000))]
    failure_limit: Option<u32>,
    on_no_data: Option<OnNoDataShape>,
}

/// What the gate does with no data at the bake deadline: `fail` (the default) or `hold`.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "OnNoData")]
#[serde(rename_all = "lowercase")]
enum OnNoDataShape {
    Fail,
    Hold,
}

#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "ErrorRateScope")]
#[serde(rename_all = "lowercase")]
enum ScopeShape {
    Cumulative,
    Stage,
}

/// How the query's value compares to the threshold: `value <comparator> threshold`.
#[allow(dead_code)]
#[derive(JsonSchema)]
#[schemars(rename = "Comparator")]
#[serde(rename_all = "lowercase")]
enum ComparatorShape {
    Lt,
    Lte,
    Gt,
    Gte,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn plan_schema() -> Value {
        serde_json::to_value(schemars::schema_for!(RolloutPlan)).expect("a schema is JSON")
    }

    /// The schema's refusals of `plan`, one line each; empty when it validates.
    fn refusals(schema: &Value, plan: &Value) -> Vec<String> {
        let validator = jsonschema::validator_for(schema).expect("the schema compiles");
        validator
            .iter_errors(plan)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect()
    }

    #[test]
    fn the_plans_the_parser_accepts_validate() {
        let schema = plan_schema();
        let plans = [
            json!({"stages": [{"selector": {"percentage": 7}, "bakeSeconds": 30}]}),
            json!({
                "stages": [
                    {"selector": {"percentage": 12.25}, "bakeSeconds": 86400, "gates": [
                        {"healthWindow": {}}, {"healthWindow": null},
                        {"errorRate": {"maxPercent": 1.5, "scope": "stage"}}]},
                    {"selector": {"labels": {"wave": "a"}}, "bakeSeconds": 60, "gates": [
                        {"throughputDrop": {"maxDropPercent": 20, "onNoData": "hold"}},
                        {"customPromQL": {"query": "up", "comparator": "gte", "threshold": 1,
                                          "intervalSeconds": 10, "failureLimit": 3}}]},
                    {"selector": {"nodeGroup": "ng_1"}, "bakeSeconds": 60.0, "gates": null,
                     "minAppliedPercent": 90},
                ],
                "autoAdvance": false,
                "autoRollbackOnGateFail": null,
                "minAppliedPercent": 50,
            }),
        ];
        for plan in plans {
            RolloutPlan::parse(&plan).expect("the parser accepts it");
            assert_eq!(refusals(&schema, &plan), Vec::<String>::new(), "{plan}");
        }
    }

    #[test]
    fn plans_of_the_wrong_shape_are_refused_by_the_schema_and_the_parser() {
        let schema = plan_schema();
        let stage = json!({"selector": {"percentage": 10}, "bakeSeconds": 60});
        let with_stage = |patch: Value| {
            let mut s = stage.clone();
            for (k, v) in patch.as_object().expect("an object") {
                s[k] = v.clone();
            }
            json!({ "stages": [s] })
        };
        let bad = [
            json!({}),
            json!({"stages": []}),
            json!({"stages": [stage], "autoAdvance": "yes"}),
            json!({"stages": [stage], "extra": 1}),
            with_stage(json!({"bakeSeconds": 29})),
            with_stage(json!({"bakeSeconds": "60"})),
            with_stage(json!({"selector": {"percentage": 0}})),
            with_stage(json!({"selector": {"percentage": 101}})),
            with_stage(json!({"selector": {"labels": {}}})),
            with_stage(json!({"selector": {"hostname": "a"}})),
            with_stage(json!({"selector": {"percentage": 5, "nodeGroup": "g"}})),
            with_stage(json!({"gates": [{"healthWindow": {"x": 1}}]})),
            with_stage(json!({"gates": [{"errorRate": {}}]})),
            with_stage(json!({"gates": [{"errorRate": {"maxPercent": 1, "scope": "all"}}]})),
            with_stage(json!({"gates": [{"latency": {"max": 1}}]})),
            with_stage(json!({"gates": [{"customPromQL": {"query": "up", "threshold": 1}}]})),
            with_stage(json!({"gates": [{"throughputDrop": {"maxDropPercent": 5,
                                                             "failureLimit": 0}}]})),
        ];
        for plan in bad {
            assert!(
                RolloutPlan::parse(&plan).is_err(),
                "the parser accepts {plan}"
            );
            assert!(
                !refusals(&schema, &plan).is_empty(),
                "the schema accepts {plan}"
            );
        }
    }

    #[test]
    fn a_canary_selector_is_a_percentage_or_labels_but_not_a_node_group() {
        let schema =
            serde_json::to_value(schemars::schema_for!(Unparsed<CanarySelector>)).expect("JSON");
        assert!(refusals(&schema, &json!({"percentage": 25})).is_empty());
        assert!(refusals(&schema, &json!({"labels": {"wave": "a"}})).is_empty());
        assert!(!refusals(&schema, &json!({"nodeGroup": "g"})).is_empty());
    }

    proptest! {
        #[test]
        fn every_canonical_plan_validates(plan in super::super::tests::arb_plan()) {
            let schema = plan_schema();
            prop_assert_eq!(refusals(&schema, &plan.to_json()), Vec::<String>::new());
        }
    }
}
