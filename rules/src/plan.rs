//! `RolloutPlan`: the stages a canary release walks through.
//!
//! A plan is built only by parsing its wire JSON ([`RolloutPlan::parse`], in `plan/parse.rs`,
//! which holds every validation rule) or by [`RolloutPlan::planless`], so a `RolloutPlan` in
//! hand is valid: 1..=20 stages, bakes of 30 s..=24 h, exact percentages, known gate kinds
//! with sane bounds. Nothing past the boundary re-checks. [`RolloutPlan::to_json`] writes the
//! canonical form back.
//!
//! A plan-less canary (one selector, one health-check window, manual broaden) is expressed as
//! a one-stage plan via [`RolloutPlan::planless`]. The plan does not remember that it was
//! plan-less: the caller keeps that flag (a release row without a `rolloutPlan` is plan-less)
//! and passes it to [`crate::release::check_action`], because only the operator actions
//! differ; baking, gates, fencing and selection are the same.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::offline::{OfflinePolicy, OfflineRule, OfflineSettings};
use crate::percent::Percent;

mod parse;
mod schema;

pub use parse::parse_canary_selector;
pub use schema::Unparsed;

/// Most stages a plan may have; more would be a plan nobody can watch.
pub const MAX_STAGES: usize = 20;

/// A refused plan, naming the field as `stages[1].gates[0].errorRate.maxPercent`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PlanError {
    pub field: String,
    pub message: String,
}

impl PlanError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> PlanError {
        PlanError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// How long a stage bakes before its gates are read: 30 s to 24 h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BakeSeconds(u32);

impl BakeSeconds {
    pub const MIN: u32 = 30;
    pub const MAX: u32 = 86_400;

    /// `None` outside `30..=86400`.
    pub fn new(seconds: u32) -> Option<BakeSeconds> {
        (Self::MIN..=Self::MAX)
            .contains(&seconds)
            .then_some(BakeSeconds(seconds))
    }

    pub fn get(self) -> u32 {
        self.0
    }

    /// The bake deadline of a stage started at `started_at_ms` (unix milliseconds), so the
    /// caller never multiplies by 1000 by hand.
    pub fn deadline_ms(self, started_at_ms: i64) -> i64 {
        started_at_ms.saturating_add(i64::from(self.0) * 1000)
    }
}

/// Which nodes a stage adds to the canary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// A share of the fleet, ranked per release so larger shares contain smaller ones.
    Percentage(Percent),
    /// Nodes carrying every pair; never empty after parsing.
    Labels(BTreeMap<String, String>),
    /// The id of a node group; its criteria are resolved at selection time.
    NodeGroup(String),
}

/// The selector of a plan-less canary: node groups did not exist in that shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanarySelector {
    Percentage(Percent),
    Labels(BTreeMap<String, String>),
}

impl From<CanarySelector> for Selector {
    fn from(selector: CanarySelector) -> Selector {
        match selector {
            CanarySelector::Percentage(p) => Selector::Percentage(p),
            CanarySelector::Labels(labels) => Selector::Labels(labels),
        }
    }
}

/// How a `customPromQL` gate compares the query result: `value <cmp> threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparator {
    Lt,
    Lte,
    Gt,
    Gte,
}

impl Comparator {
    pub fn as_str(self) -> &'static str {
        match self {
            Comparator::Lt => "lt",
            Comparator::Lte => "lte",
            Comparator::Gt => "gt",
            Comparator::Gte => "gte",
        }
    }

    /// Reads the wire spelling (`lt`, `lte`, `gt`, `gte`).
    pub fn parse(text: &str) -> Option<Comparator> {
        [
            Comparator::Lt,
            Comparator::Lte,
            Comparator::Gt,
            Comparator::Gte,
        ]
        .into_iter()
        .find(|c| c.as_str() == text)
    }

    /// Whether `value <cmp> threshold` holds; false for NaN, so a NaN result fails.
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparator::Lt => value < threshold,
            Comparator::Lte => value <= threshold,
            Comparator::Gt => value > threshold,
            Comparator::Gte => value >= threshold,
        }
    }
}

/// What a gate does when its signal has no data (or cannot be read) at the bake deadline.
/// During the bake such checks are inconclusive and never fail the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnNoData {
    /// Fail closed: the gate fails (today's rule, the default).
    #[default]
    Fail,
    /// Hold the release for an operator with the gate's reason.
    Hold,
}

impl OnNoData {
    pub fn as_str(self) -> &'static str {
        match self {
            OnNoData::Fail => "fail",
            OnNoData::Hold => "hold",
        }
    }
}

/// Which canary nodes an `errorRate` gate counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// Every node any started stage targeted (the default).
    #[default]
    Cumulative,
    /// Only the nodes the current stage added.
    Stage,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Cumulative => "cumulative",
            Scope::Stage => "stage",
        }
    }
}

/// How a signal gate is checked while its stage bakes: every `interval_seconds`, failing
/// after `failure_limit` consecutive failing checks; `on_no_data` settles a gate that has no
/// number at the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watch {
    pub interval_seconds: u32,
    pub failure_limit: u32,
    pub on_no_data: OnNoData,
}

impl Watch {
    pub const DEFAULT_INTERVAL_SECONDS: u32 = 30;
    pub const MIN_INTERVAL_SECONDS: u32 = 10;
    pub const MAX_FAILURE_LIMIT: u32 = 1000;

    pub fn interval_ms(self) -> i64 {
        i64::from(self.interval_seconds) * 1000
    }
}

impl Default for Watch {
    fn default() -> Watch {
        Watch {
            interval_seconds: Watch::DEFAULT_INTERVAL_SECONDS,
            failure_limit: 1,
            on_no_data: OnNoData::Fail,
        }
    }
}

/// A check on a stage. `healthWindow` is read when the bake ends; the signal gates are also
/// checked during the bake (see [`Watch`]). Bounds hold after parsing: percentages are finite
/// and within `0..=100`, thresholds finite, queries non-blank.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    HealthWindow,
    ErrorRate {
        max_percent: f64,
        scope: Scope,
        watch: Watch,
    },
    ThroughputDrop {
        max_drop_percent: f64,
        watch: Watch,
    },
    CustomPromQl {
        query: String,
        comparator: Comparator,
        threshold: f64,
        watch: Watch,
    },
}

impl Gate {
    /// The wire name, also used as `GateResult::gate`.
    pub fn kind(&self) -> &'static str {
        match self {
            Gate::HealthWindow => "healthWindow",
            Gate::ErrorRate { .. } => "errorRate",
            Gate::ThroughputDrop { .. } => "throughputDrop",
            Gate::CustomPromQl { .. } => "customPromQL",
        }
    }

    /// How the gate is checked during the bake; `None` for `healthWindow`.
    pub fn watch(&self) -> Option<Watch> {
        match self {
            Gate::HealthWindow => None,
            Gate::ErrorRate { watch, .. }
            | Gate::ThroughputDrop { watch, .. }
            | Gate::CustomPromQl { watch, .. } => Some(*watch),
        }
    }

    /// The threshold the gate compares against, for the live view.
    pub fn threshold(&self) -> Option<f64> {
        match self {
            Gate::HealthWindow => None,
            Gate::ErrorRate { max_percent, .. } => Some(*max_percent),
            Gate::ThroughputDrop {
                max_drop_percent, ..
            } => Some(*max_drop_percent),
            Gate::CustomPromQl { threshold, .. } => Some(*threshold),
        }
    }
}

/// One step of a rollout: who joins, how long they bake, what must hold afterwards.
/// An empty `gates` list is allowed: the stage passes when its bake ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub selector: Selector,
    pub bake: BakeSeconds,
    pub gates: Vec<Gate>,
    /// Overrides the plan's `minAppliedPercent` for this stage.
    pub min_applied_percent: Option<f64>,
    /// Overrides the plan's offline fields for this stage ([`crate::offline`]).
    pub offline: OfflineSettings,
}

/// A validated rollout plan. Fields are private so that 1..=20 stages always holds.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutPlan {
    stages: Vec<Stage>,
    auto_advance: bool,
    auto_rollback_on_gate_fail: bool,
    min_applied_percent: f64,
    /// `offlineNodes`, `offlineAfterSeconds`, `maxOfflinePercent` as written (defaults unset).
    offline: OfflineSettings,
}

/// The share of a stage's targeted nodes that must report running the canary before the
/// stage passes, unless the plan or stage says otherwise.
pub const DEFAULT_MIN_APPLIED_PERCENT: f64 = 100.0;

impl RolloutPlan {
    /// The single-stage plan a plan-less canary runs: bake for the health-check window, pass
    /// on the health window alone, then hold for an operator to broaden (never advance or
    /// roll back on its own). See the module docs for who keeps the plan-less flag.
    pub fn planless(
        selector: CanarySelector,
        health_check_window_minutes: u32,
    ) -> Result<RolloutPlan, PlanError> {
        let field = "healthCheckWindowMinutes";
        if health_check_window_minutes < 1 {
            return Err(PlanError::new(field, "must be at least 1"));
        }
        let bake = health_check_window_minutes
            .checked_mul(60)
            .and_then(BakeSeconds::new)
            .ok_or_else(|| PlanError::new(field, "must be at most 1440"))?;
        Ok(RolloutPlan {
            stages: vec![Stage {
                selector: selector.into(),
                bake,
                gates: vec![Gate::HealthWindow],
                min_applied_percent: None,
                offline: OfflineSettings::default(),
            }],
            auto_advance: false,
            auto_rollback_on_gate_fail: false,
            min_applied_percent: DEFAULT_MIN_APPLIED_PERCENT,
            offline: OfflineSettings::default(),
        })
    }

    /// Never empty.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    pub fn stage(&self, index: usize) -> Option<&Stage> {
        self.stages.get(index)
    }

    pub fn auto_advance(&self) -> bool {
        self.auto_advance
    }

    pub fn auto_rollback_on_gate_fail(&self) -> bool {
        self.auto_rollback_on_gate_fail
    }

    /// The share (0..=100) of the targeted nodes that must run the canary before stage
    /// `index` passes: the stage's own `minAppliedPercent`, else the plan's.
    pub fn min_applied_percent(&self, index: usize) -> f64 {
        self.stage(index)
            .and_then(|s| s.min_applied_percent)
            .unwrap_or(self.min_applied_percent)
    }

    /// What stage `index` does with its offline and departed nodes: the stage's offline
    /// fields, else the plan's, else the defaults, `default_policy` among them (the server's,
    /// [`crate::offline`]).
    pub fn offline_rule(&self, index: usize, default_policy: OfflinePolicy) -> OfflineRule {
        let stage = self.stage(index).map(|s| s.offline).unwrap_or_default();
        stage.over(self.offline).rule(default_policy)
    }

    /// Whether any stage needs Prometheus; create refuses such a plan when it is not set up.
    pub fn uses_promql(&self) -> bool {
        self.gates()
            .any(|gate| matches!(gate, Gate::CustomPromQl { .. }))
    }

    /// Node groups the plan names, first use first, without repeats, so the caller can check
    /// each belongs to the release's environment.
    pub fn node_group_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = Vec::new();
        for stage in &self.stages {
            if let Selector::NodeGroup(id) = &stage.selector {
                if !ids.contains(&id.as_str()) {
                    ids.push(id);
                }
            }
        }
        ids
    }

    /// The canonical wire JSON; `RolloutPlan::parse(&plan.to_json())` gives `plan` back.
    pub fn to_json(&self) -> Value {
        let stages: Vec<Value> = self.stages.iter().map(stage_json).collect();
        let mut json = json!({
            "stages": stages,
            "autoAdvance": self.auto_advance,
            "autoRollbackOnGateFail": self.auto_rollback_on_gate_fail,
            "minAppliedPercent": self.min_applied_percent,
        });
        offline_json(&self.offline, &mut json);
        json
    }

    fn gates(&self) -> impl Iterator<Item = &Gate> {
        self.stages.iter().flat_map(|stage| &stage.gates)
    }
}

/// Serialises as [`RolloutPlan::to_json`].
impl serde::Serialize for RolloutPlan {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

/// Reads through [`RolloutPlan::parse`], so a deserialised plan is as valid as a parsed one.
impl<'de> serde::Deserialize<'de> for RolloutPlan {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        RolloutPlan::parse(&value).map_err(serde::de::Error::custom)
    }
}

impl Selector {
    /// One line for the rollout view: `10% of the fleet`, `labels tier=edge`, `node group g`.
    pub fn describe(&self) -> String {
        match self {
            Selector::Percentage(p) => format!("{p} of the fleet"),
            Selector::Labels(labels) => {
                let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("labels {}", pairs.join(", "))
            }
            Selector::NodeGroup(id) => format!("node group {id}"),
        }
    }
}

fn stage_json(stage: &Stage) -> Value {
    let selector = match &stage.selector {
        Selector::Percentage(p) => json!({ "percentage": p.to_json() }),
        Selector::Labels(labels) => json!({ "labels": labels }),
        Selector::NodeGroup(id) => json!({ "nodeGroup": id }),
    };
    let gates: Vec<Value> = stage.gates.iter().map(gate_json).collect();
    let mut json = json!({ "selector": selector, "bakeSeconds": stage.bake.get(), "gates": gates });
    if let Some(min) = stage.min_applied_percent {
        json["minAppliedPercent"] = min.into();
    }
    offline_json(&stage.offline, &mut json);
    json
}

/// The offline fields that were set (plans written before they existed stay as they were).
fn offline_json(offline: &OfflineSettings, json: &mut Value) {
    if let Some(policy) = offline.policy {
        json["offlineNodes"] = policy.as_str().into();
    }
    if let Some(seconds) = offline.after_seconds {
        json["offlineAfterSeconds"] = seconds.into();
    }
    if let Some(percent) = offline.max_percent {
        json["maxOfflinePercent"] = percent.into();
    }
}

fn gate_json(gate: &Gate) -> Value {
    let mut body = match gate {
        Gate::HealthWindow => json!({}),
        Gate::ErrorRate {
            max_percent, scope, ..
        } => json!({ "maxPercent": max_percent, "scope": scope.as_str() }),
        Gate::ThroughputDrop {
            max_drop_percent, ..
        } => json!({ "maxDropPercent": max_drop_percent }),
        Gate::CustomPromQl {
            query,
            comparator,
            threshold,
            ..
        } => json!({ "query": query, "comparator": comparator.as_str(), "threshold": threshold }),
    };
    if let (Some(watch), Value::Object(fields)) = (gate.watch(), &mut body) {
        fields.insert("intervalSeconds".into(), watch.interval_seconds.into());
        fields.insert("failureLimit".into(), watch.failure_limit.into());
        fields.insert("onNoData".into(), watch.on_no_data.as_str().into());
    }
    json!({ gate.kind(): body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(plan: Value) -> RolloutPlan {
        RolloutPlan::parse(&plan).expect("valid plan")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn stage(selector: Value, gates: Value) -> Value {
        json!({"selector": selector, "bakeSeconds": 30, "gates": gates})
    }

    #[test]
    fn the_canonical_json_spells_out_every_default() {
        let plan = parse(json!({"stages": [{
            "selector": {"percentage": 12.5},
            "bakeSeconds": 60,
            "gates": [{"healthWindow": null}, {"errorRate": {"maxPercent": 1}}],
        }]}));
        let canonical = json!({
            "stages": [{
                "selector": {"percentage": 12.5},
                "bakeSeconds": 60,
                "gates": [{"healthWindow": {}}, {"errorRate": {
                    "maxPercent": 1.0, "scope": "cumulative",
                    "intervalSeconds": 30, "failureLimit": 1, "onNoData": "fail",
                }}],
            }],
            "autoAdvance": true,
            "autoRollbackOnGateFail": true,
            "minAppliedPercent": 100.0,
        });
        assert_eq!(plan.to_json(), canonical);
    }

    #[test]
    fn a_plan_reports_whether_it_needs_prometheus() {
        let health = stage(json!({"percentage": 5}), json!([{"healthWindow": {}}]));
        let promql = json!({"customPromQL": {"query": "up", "comparator": "lt", "threshold": 1}});
        let promql = stage(json!({"percentage": 5}), json!([promql]));
        assert!(!parse(json!({ "stages": [health.clone()] })).uses_promql());
        assert!(parse(json!({ "stages": [health, promql] })).uses_promql());
    }

    #[test]
    fn node_group_ids_are_listed_once_in_stage_order() {
        let plan = parse(json!({"stages": [
            stage(json!({"nodeGroup": "b"}), json!([])),
            stage(json!({"percentage": 50}), json!([])),
            stage(json!({"nodeGroup": "a"}), json!([])),
            stage(json!({"nodeGroup": "b"}), json!([])),
        ]}));
        assert_eq!(plan.node_group_ids(), vec!["b", "a"]);
    }

    #[test]
    fn a_planless_canary_bakes_for_its_window_then_waits_for_an_operator() {
        let selector = CanarySelector::Labels(labels(&[("wave", "a")]));
        let plan = RolloutPlan::planless(selector, 10).expect("valid");
        let [stage] = plan.stages() else {
            panic!("one stage")
        };
        assert_eq!(stage.bake.get(), 600);
        assert_eq!(stage.gates, [Gate::HealthWindow]);
        assert_eq!(stage.selector, Selector::Labels(labels(&[("wave", "a")])));
        assert!(!plan.auto_advance() && !plan.auto_rollback_on_gate_fail());
    }

    #[test]
    fn a_planless_health_check_window_is_one_minute_to_one_day() {
        let planless = |minutes| {
            RolloutPlan::planless(CanarySelector::Percentage(Percent::HUNDRED), minutes)
                .map(|plan| plan.stages()[0].bake.get())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            planless(0),
            Err("healthCheckWindowMinutes: must be at least 1".into())
        );
        assert_eq!(
            planless(1441),
            Err("healthCheckWindowMinutes: must be at most 1440".into())
        );
        assert_eq!(
            planless(u32::MAX),
            Err("healthCheckWindowMinutes: must be at most 1440".into())
        );
        assert_eq!(planless(1), Ok(60));
        assert_eq!(planless(1440), Ok(86_400));
    }

    #[test]
    fn a_bake_deadline_is_the_start_plus_the_bake_in_milliseconds() {
        let bake = BakeSeconds::new(90).expect("in range");
        assert_eq!(bake.deadline_ms(1_000), 91_000);
        assert_eq!(BakeSeconds::new(29), None);
        assert_eq!(BakeSeconds::new(86_401), None);
    }

    fn arb_selector() -> impl Strategy<Value = Selector> {
        prop_oneof![
            (1u32..=10_000).prop_filter_map("in range", |h| {
                Percent::from_hundredths(h).map(Selector::Percentage)
            }),
            proptest::collection::btree_map("[a-z/.-]{1,8}", ".{0,6}", 1..4)
                .prop_map(Selector::Labels),
            "[a-z0-9_]{1,10}".prop_map(Selector::NodeGroup),
        ]
    }

    fn arb_gate() -> impl Strategy<Value = Gate> {
        let comparator = prop_oneof![
            Just(Comparator::Lt),
            Just(Comparator::Lte),
            Just(Comparator::Gt),
            Just(Comparator::Gte),
        ];
        let promql = ("[a-z_(){}]{1,20}", comparator, -1e12f64..1e12);
        let watch = (
            10u32..=86_400,
            1u32..=Watch::MAX_FAILURE_LIMIT,
            any::<bool>(),
        )
            .prop_map(|(interval_seconds, failure_limit, hold)| Watch {
                interval_seconds,
                failure_limit,
                on_no_data: if hold { OnNoData::Hold } else { OnNoData::Fail },
            });
        let scope = prop_oneof![Just(Scope::Cumulative), Just(Scope::Stage)];
        prop_oneof![
            Just(Gate::HealthWindow),
            (0.0f64..=100.0, scope, watch.clone()).prop_map(|(max_percent, scope, watch)| {
                Gate::ErrorRate {
                    max_percent,
                    scope,
                    watch,
                }
            }),
            (0.0f64..=100.0, watch.clone()).prop_map(|(max_drop_percent, watch)| {
                Gate::ThroughputDrop {
                    max_drop_percent,
                    watch,
                }
            }),
            (promql, watch).prop_map(|((query, comparator, threshold), watch)| {
                Gate::CustomPromQl {
                    query,
                    comparator,
                    threshold,
                    watch,
                }
            }),
        ]
    }

    pub(super) fn arb_plan() -> impl Strategy<Value = RolloutPlan> {
        let gates = proptest::collection::vec(arb_gate(), 0..4);
        let bake =
            (BakeSeconds::MIN..=BakeSeconds::MAX).prop_filter_map("in range", BakeSeconds::new);
        let min = proptest::option::of(0.0f64..=100.0);
        let stage = (arb_selector(), bake, gates, min, arb_offline()).prop_map(
            |(selector, bake, gates, min, offline)| Stage {
                selector,
                bake,
                gates,
                min_applied_percent: min,
                offline,
            },
        );
        let stages = proptest::collection::vec(stage, 1..=MAX_STAGES);
        (
            stages,
            any::<bool>(),
            any::<bool>(),
            0.0f64..=100.0,
            arb_offline(),
        )
            .prop_map(
                |(stages, auto_advance, auto_rollback, min, offline)| RolloutPlan {
                    stages,
                    auto_advance,
                    auto_rollback_on_gate_fail: auto_rollback,
                    min_applied_percent: min,
                    offline,
                },
            )
    }

    fn arb_offline() -> impl Strategy<Value = OfflineSettings> {
        use crate::offline::{OfflinePolicy, MAX_OFFLINE_AFTER_SECONDS};
        (
            proptest::option::of(proptest::sample::select(OfflinePolicy::ALL.to_vec())),
            proptest::option::of(1..=MAX_OFFLINE_AFTER_SECONDS),
            proptest::option::of(0.0f64..=100.0),
        )
            .prop_map(|(policy, after_seconds, max_percent)| OfflineSettings {
                policy,
                after_seconds,
                max_percent,
            })
    }

    proptest! {
        #[test]
        fn a_plan_survives_a_round_trip_through_its_canonical_json(plan in arb_plan()) {
            prop_assert_eq!(RolloutPlan::parse(&plan.to_json()), Ok(plan.clone()));
        }

        #[test]
        fn selectors_and_bakes_survive_the_json_text_a_browser_sends(plan in arb_plan()) {
            // Float thresholds may move by one ulp through serde_json's default float parser;
            // percentages and bake times must not move at all.
            let text = serde_json::to_string(&plan.to_json()).expect("serialises");
            let reparsed = RolloutPlan::parse(&serde_json::from_str(&text).expect("parses"))
                .expect("valid");
            let shape = |p: &RolloutPlan| -> Vec<(Selector, BakeSeconds)> {
                p.stages().iter().map(|s| (s.selector.clone(), s.bake)).collect()
            };
            prop_assert_eq!(shape(&reparsed), shape(&plan));
        }
    }
}
