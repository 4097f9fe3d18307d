//! The rollout plan editor's state as plain data, the edits its controls make, and how it
//! becomes the plan JSON of docs/rollouts.md (camelCase), which `vf_rules` then validates.
//!
//! Text fields keep what the operator typed; turning them into JSON never refuses anything.
//! What JSON cannot carry (labels that are not `key=value`, a blank field) becomes a "local"
//! `PlanError` under the same field name the rules would use, so every message lands on the
//! control that caused it.

use serde_json::{json, Map, Value};
use vf_rules::{OfflinePolicy, Percent, PlanError};

use crate::types::parse_label_text;

pub use vf_rules::plan::MAX_STAGES;

/// How a stage (or a plan-less canary) picks nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorKind {
    Labels,
    Percentage,
    NodeGroup,
}

impl SelectorKind {
    /// The `<option value>`, also the wire key.
    pub fn value(self) -> &'static str {
        match self {
            SelectorKind::Labels => "labels",
            SelectorKind::Percentage => "percentage",
            SelectorKind::NodeGroup => "nodeGroup",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SelectorKind::Labels => "Labels",
            SelectorKind::Percentage => "Percentage",
            SelectorKind::NodeGroup => "Node group",
        }
    }

    pub fn from_value(value: &str) -> Option<SelectorKind> {
        [
            SelectorKind::Labels,
            SelectorKind::Percentage,
            SelectorKind::NodeGroup,
        ]
        .into_iter()
        .find(|k| k.value() == value)
    }
}

/// A selector as typed: every kind keeps its own text, so switching kinds loses nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorDraft {
    pub kind: SelectorKind,
    pub labels: String,
    pub percentage: String,
    pub node_group: String,
}

impl SelectorDraft {
    pub fn percentage(text: &str) -> SelectorDraft {
        SelectorDraft {
            kind: SelectorKind::Percentage,
            labels: String::new(),
            percentage: text.to_owned(),
            node_group: String::new(),
        }
    }

    pub fn apply(&mut self, edit: SelectorEdit) {
        match edit {
            SelectorEdit::Kind(kind) => self.kind = kind,
            SelectorEdit::Labels(text) => self.labels = text,
            SelectorEdit::Percentage(text) => self.percentage = text,
            SelectorEdit::NodeGroup(id) => self.node_group = id,
        }
    }

    /// The wire selector; problems JSON cannot express are pushed to `local` under `field`.
    pub fn to_json(&self, field: &str, local: &mut Vec<PlanError>) -> Value {
        match self.kind {
            SelectorKind::Percentage => {
                let field = format!("{field}.percentage");
                json!({ "percentage": percent_value(&self.percentage, &field, local) })
            }
            SelectorKind::Labels => {
                let labels = parse_label_text(&self.labels).unwrap_or_else(|message| {
                    local.push(problem(format!("{field}.labels"), message));
                    Default::default()
                });
                json!({ "labels": labels })
            }
            SelectorKind::NodeGroup => {
                if self.node_group.trim().is_empty() {
                    local.push(problem(format!("{field}.nodeGroup"), "choose a node group"));
                }
                json!({ "nodeGroup": self.node_group })
            }
        }
    }
}

/// One control's change to a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorEdit {
    Kind(SelectorKind),
    Labels(String),
    Percentage(String),
    NodeGroup(String),
}

/// The unit the bake time is typed in; the wire always carries seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BakeUnit {
    Seconds,
    Minutes,
    Hours,
}

impl BakeUnit {
    pub const ALL: [BakeUnit; 3] = [BakeUnit::Seconds, BakeUnit::Minutes, BakeUnit::Hours];

    /// Both the `<option value>` and its text.
    pub fn label(self) -> &'static str {
        match self {
            BakeUnit::Seconds => "seconds",
            BakeUnit::Minutes => "minutes",
            BakeUnit::Hours => "hours",
        }
    }

    pub fn from_label(label: &str) -> Option<BakeUnit> {
        BakeUnit::ALL.into_iter().find(|u| u.label() == label)
    }

    fn seconds(self) -> f64 {
        match self {
            BakeUnit::Seconds => 1.0,
            BakeUnit::Minutes => 60.0,
            BakeUnit::Hours => 3600.0,
        }
    }
}

/// `bakeSeconds` for an amount typed in `unit`: whole seconds as an integer (1.1 minutes is
/// 66, not 66.00000000000001), anything else passed on for the rules to name. `None` when
/// blank, so the rules report the field as required.
pub fn bake_seconds(amount: &str, unit: BakeUnit) -> Option<Value> {
    let text = amount.trim();
    if text.is_empty() {
        return None;
    }
    match text.parse::<f64>() {
        Ok(a) if a.is_finite() => {
            let seconds = a * unit.seconds();
            let whole = seconds.round();
            let close = (seconds - whole).abs() < 1e-6;
            Some(number(if close { whole } else { seconds }))
        }
        _ => Some(Value::String(text.to_owned())),
    }
}

/// Which gate a checkbox turns on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateKind {
    HealthWindow,
    ErrorRate,
    ThroughputDrop,
    PromQl,
}

/// A stage's gates as typed. Settings of an unchecked gate are kept for when it comes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatesDraft {
    pub health_window: bool,
    pub error_rate: bool,
    pub max_error_percent: String,
    pub throughput_drop: bool,
    pub max_drop_percent: String,
    pub promql: bool,
    pub query: String,
    pub comparator: String,
    pub threshold: String,
}

impl Default for GatesDraft {
    fn default() -> GatesDraft {
        GatesDraft {
            health_window: true,
            error_rate: false,
            max_error_percent: "1".into(),
            throughput_drop: false,
            max_drop_percent: "20".into(),
            promql: false,
            query: String::new(),
            comparator: "lt".into(),
            threshold: String::new(),
        }
    }
}

/// One control's change to a stage's gates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateEdit {
    Toggle(GateKind, bool),
    MaxErrorPercent(String),
    MaxDropPercent(String),
    Query(String),
    Comparator(String),
    Threshold(String),
}

impl GatesDraft {
    pub fn is_on(&self, kind: GateKind) -> bool {
        match kind {
            GateKind::HealthWindow => self.health_window,
            GateKind::ErrorRate => self.error_rate,
            GateKind::ThroughputDrop => self.throughput_drop,
            GateKind::PromQl => self.promql,
        }
    }

    pub fn apply(&mut self, edit: GateEdit) {
        match edit {
            GateEdit::Toggle(GateKind::HealthWindow, on) => self.health_window = on,
            GateEdit::Toggle(GateKind::ErrorRate, on) => self.error_rate = on,
            GateEdit::Toggle(GateKind::ThroughputDrop, on) => self.throughput_drop = on,
            GateEdit::Toggle(GateKind::PromQl, on) => self.promql = on,
            GateEdit::MaxErrorPercent(text) => self.max_error_percent = text,
            GateEdit::MaxDropPercent(text) => self.max_drop_percent = text,
            GateEdit::Query(text) => self.query = text,
            GateEdit::Comparator(text) => self.comparator = text,
            GateEdit::Threshold(text) => self.threshold = text,
        }
    }

    /// The wire gates in a fixed order. PromQL is left out when Prometheus is not
    /// configured: the control is not offered then, so nothing the operator sees asks for it.
    fn to_json(&self, prometheus: bool) -> Vec<Value> {
        let mut gates = Vec::new();
        if self.health_window {
            gates.push(json!({ "healthWindow": {} }));
        }
        if self.error_rate {
            let settings = settings(&[("maxPercent", number_text(&self.max_error_percent))]);
            gates.push(json!({ "errorRate": settings }));
        }
        if self.throughput_drop {
            let settings = settings(&[("maxDropPercent", number_text(&self.max_drop_percent))]);
            gates.push(json!({ "throughputDrop": settings }));
        }
        if self.promql && prometheus {
            let settings = settings(&[
                ("query", Some(Value::String(self.query.clone()))),
                ("comparator", Some(Value::String(self.comparator.clone()))),
                ("threshold", number_text(&self.threshold)),
            ]);
            gates.push(json!({ "customPromQL": settings }));
        }
        gates
    }
}

/// One stage as typed. `key` is stable across reordering so the view can keep each stage's
/// controls (and focus) while stages move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageDraft {
    pub key: u32,
    pub selector: SelectorDraft,
    pub bake_amount: String,
    pub bake_unit: BakeUnit,
    pub gates: GatesDraft,
}

impl StageDraft {
    fn new(key: u32, percentage: &str, bake_minutes: &str) -> StageDraft {
        StageDraft {
            key,
            selector: SelectorDraft::percentage(percentage),
            bake_amount: bake_minutes.to_owned(),
            bake_unit: BakeUnit::Minutes,
            gates: GatesDraft::default(),
        }
    }

    fn apply(&mut self, edit: StageEdit) {
        match edit {
            StageEdit::Selector(e) => self.selector.apply(e),
            StageEdit::BakeAmount(text) => self.bake_amount = text,
            StageEdit::BakeUnit(unit) => self.bake_unit = unit,
            StageEdit::Gate(e) => self.gates.apply(e),
        }
    }

    fn to_json(&self, index: usize, prometheus: bool, local: &mut Vec<PlanError>) -> Value {
        let mut stage = Map::new();
        let selector = self
            .selector
            .to_json(&format!("stages[{index}].selector"), local);
        stage.insert("selector".into(), selector);
        if let Some(bake) = bake_seconds(&self.bake_amount, self.bake_unit) {
            stage.insert("bakeSeconds".into(), bake);
        }
        stage.insert("gates".into(), Value::Array(self.gates.to_json(prometheus)));
        Value::Object(stage)
    }
}

/// One control's change to a stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageEdit {
    Selector(SelectorEdit),
    BakeAmount(String),
    BakeUnit(BakeUnit),
    Gate(GateEdit),
}

/// The whole plan as typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanDraft {
    pub stages: Vec<StageDraft>,
    pub auto_advance: bool,
    pub auto_rollback_on_gate_fail: bool,
    /// What a targeted node that stopped talking does to its stage (`offlineNodes`); `None`
    /// leaves it to the server's default.
    pub offline_nodes: Option<OfflinePolicy>,
    next_key: u32,
}

impl Default for PlanDraft {
    /// One small canary slice; "Add stage" then widens to everyone.
    fn default() -> PlanDraft {
        PlanDraft {
            stages: vec![StageDraft::new(1, "10", "5")],
            auto_advance: true,
            auto_rollback_on_gate_fail: true,
            offline_nodes: None,
            next_key: 2,
        }
    }
}

/// One control's change to the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanEdit {
    AddStage,
    Remove(u32),
    MoveUp(u32),
    MoveDown(u32),
    AutoAdvance(bool),
    AutoRollback(bool),
    OfflineNodes(Option<OfflinePolicy>),
    Stage(u32, StageEdit),
}

impl PlanDraft {
    pub fn keys(&self) -> Vec<u32> {
        self.stages.iter().map(|s| s.key).collect()
    }

    pub fn index_of(&self, key: u32) -> Option<usize> {
        self.stages.iter().position(|s| s.key == key)
    }

    pub fn stage(&self, key: u32) -> Option<&StageDraft> {
        self.stages.iter().find(|s| s.key == key)
    }

    pub fn can_add(&self) -> bool {
        self.stages.len() < MAX_STAGES
    }

    pub fn apply(&mut self, edit: PlanEdit) {
        match edit {
            PlanEdit::AddStage if self.can_add() => self.add_stage(),
            PlanEdit::AddStage => {}
            PlanEdit::Remove(key) if self.stages.len() > 1 => self.stages.retain(|s| s.key != key),
            PlanEdit::Remove(_) => {}
            PlanEdit::MoveUp(key) => {
                if let Some(i) = self.index_of(key).filter(|i| *i > 0) {
                    self.stages.swap(i, i - 1);
                }
            }
            PlanEdit::MoveDown(key) => {
                if let Some(i) = self.index_of(key).filter(|i| i + 1 < self.stages.len()) {
                    self.stages.swap(i, i + 1);
                }
            }
            PlanEdit::AutoAdvance(on) => self.auto_advance = on,
            PlanEdit::AutoRollback(on) => self.auto_rollback_on_gate_fail = on,
            PlanEdit::OfflineNodes(policy) => self.offline_nodes = policy,
            PlanEdit::Stage(key, e) => {
                if let Some(stage) = self.stages.iter_mut().find(|s| s.key == key) {
                    stage.apply(e);
                }
            }
        }
    }

    /// A new last stage: everyone, baking and gated like the stage before it.
    fn add_stage(&mut self) {
        let key = self.next_key;
        self.next_key += 1;
        let mut stage = StageDraft::new(key, "100", "10");
        if let Some(last) = self.stages.last() {
            stage.bake_amount = last.bake_amount.clone();
            stage.bake_unit = last.bake_unit;
            stage.gates = last.gates.clone();
        }
        self.stages.push(stage);
    }

    /// The plan JSON and the problems only the editor can see (see the module docs).
    pub fn to_json(&self, prometheus: bool) -> (Value, Vec<PlanError>) {
        let mut local = Vec::new();
        let stages: Vec<Value> = (self.stages.iter().enumerate())
            .map(|(i, s)| s.to_json(i, prometheus, &mut local))
            .collect();
        let mut plan = json!({
            "stages": stages,
            "autoAdvance": self.auto_advance,
            "autoRollbackOnGateFail": self.auto_rollback_on_gate_fail,
        });
        if let Some(policy) = self.offline_nodes {
            plan["offlineNodes"] = policy.as_str().into();
        }
        (plan, local)
    }
}

pub(super) fn problem(field: impl Into<String>, message: impl Into<String>) -> PlanError {
    PlanError {
        field: field.into(),
        message: message.into(),
    }
}

/// A percentage typed as decimal text, kept exact (`Percent` reads the digits, never a
/// float). What `Percent` refuses is passed on as a JSON number when it is one, so the rules
/// give their precise message ("at most two decimal places"), and as text otherwise.
fn percent_value(text: &str, field: &str, local: &mut Vec<PlanError>) -> Value {
    let text = text.trim();
    if text.is_empty() {
        local.push(problem(field, "is required"));
        return Value::Null;
    }
    match Percent::from_decimal_str(text) {
        Ok(p) => p.to_json(),
        Err(_) => number_text(text).unwrap_or(Value::Null),
    }
}

/// A number field: `None` when blank (the rules then say "is required"), a JSON number when
/// it is one, else the text itself (the rules then say it must be a number).
fn number_text(text: &str) -> Option<Value> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(match text.parse::<f64>() {
        Ok(f) if f.is_finite() => number(f),
        _ => Value::String(text.to_owned()),
    })
}

/// Whole values become JSON integers, so `300` is sent as `300`, not `300.0`.
fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9e15 {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

fn settings(entries: &[(&str, Option<Value>)]) -> Value {
    let map: Map<String, Value> = entries
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| ((*k).to_owned(), v)))
        .collect();
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vf_rules::RolloutPlan;

    /// The default stage plus one added: 10 % then everyone.
    fn two_stages() -> PlanDraft {
        let mut plan = PlanDraft::default();
        plan.apply(PlanEdit::AddStage);
        plan
    }

    fn edit(plan: &mut PlanDraft, index: usize, e: StageEdit) {
        let key = plan.stages[index].key;
        plan.apply(PlanEdit::Stage(key, e));
    }

    #[test]
    fn a_default_plan_with_a_stage_added_is_the_camel_case_json_of_the_docs() {
        let (plan, local) = two_stages().to_json(false);
        assert!(local.is_empty());
        assert_eq!(
            plan,
            json!({
                "stages": [
                    {"selector": {"percentage": 10}, "bakeSeconds": 300, "gates": [{"healthWindow": {}}]},
                    {"selector": {"percentage": 100}, "bakeSeconds": 300, "gates": [{"healthWindow": {}}]},
                ],
                "autoAdvance": true,
                "autoRollbackOnGateFail": true,
            })
        );
        assert!(RolloutPlan::parse(&plan).is_ok());
    }

    #[test]
    fn bake_time_is_converted_to_whole_seconds() {
        assert_eq!(bake_seconds("45", BakeUnit::Seconds), Some(json!(45)));
        assert_eq!(bake_seconds("5", BakeUnit::Minutes), Some(json!(300)));
        assert_eq!(bake_seconds("1.1", BakeUnit::Minutes), Some(json!(66)));
        assert_eq!(bake_seconds("2", BakeUnit::Hours), Some(json!(7200)));
        assert_eq!(bake_seconds("0.5", BakeUnit::Hours), Some(json!(1800)));
        assert_eq!(bake_seconds("1.5", BakeUnit::Seconds), Some(json!(1.5)));
        assert_eq!(bake_seconds("soon", BakeUnit::Minutes), Some(json!("soon")));
        assert_eq!(bake_seconds("  ", BakeUnit::Minutes), None);
    }

    #[test]
    fn every_gate_serialises_with_its_settings_and_promql_only_with_prometheus() {
        let mut plan = PlanDraft::default();
        for e in [
            GateEdit::Toggle(GateKind::ErrorRate, true),
            GateEdit::MaxErrorPercent("2.5".into()),
            GateEdit::Toggle(GateKind::ThroughputDrop, true),
            GateEdit::Toggle(GateKind::PromQl, true),
            GateEdit::Query("sum(up)".into()),
            GateEdit::Comparator("gte".into()),
            GateEdit::Threshold("3".into()),
        ] {
            edit(&mut plan, 0, StageEdit::Gate(e));
        }
        let (with_prometheus, _) = plan.to_json(true);
        assert_eq!(
            with_prometheus["stages"][0]["gates"],
            json!([
                {"healthWindow": {}},
                {"errorRate": {"maxPercent": 2.5}},
                {"throughputDrop": {"maxDropPercent": 20}},
                {"customPromQL": {"query": "sum(up)", "comparator": "gte", "threshold": 3}},
            ])
        );
        let (without, _) = plan.to_json(false);
        assert_eq!(
            without["stages"][0]["gates"].as_array().map(Vec::len),
            Some(3)
        );
    }

    #[test]
    fn selectors_serialise_per_kind_and_keep_each_kind_text() {
        let mut plan = two_stages();
        edit(
            &mut plan,
            0,
            StageEdit::Selector(SelectorEdit::Labels("rollout-wave=0, zone=a".into())),
        );
        edit(
            &mut plan,
            0,
            StageEdit::Selector(SelectorEdit::Kind(SelectorKind::Labels)),
        );
        edit(
            &mut plan,
            1,
            StageEdit::Selector(SelectorEdit::Kind(SelectorKind::NodeGroup)),
        );
        edit(
            &mut plan,
            1,
            StageEdit::Selector(SelectorEdit::NodeGroup("g1".into())),
        );
        let (json, local) = plan.to_json(false);
        assert!(local.is_empty());
        assert_eq!(
            json["stages"][0]["selector"],
            json!({"labels": {"rollout-wave": "0", "zone": "a"}})
        );
        assert_eq!(json["stages"][1]["selector"], json!({"nodeGroup": "g1"}));
        edit(
            &mut plan,
            0,
            StageEdit::Selector(SelectorEdit::Kind(SelectorKind::Percentage)),
        );
        assert_eq!(
            plan.to_json(false).0["stages"][0]["selector"],
            json!({"percentage": 10})
        );
    }

    #[test]
    fn percentages_are_read_exactly_and_bad_ones_reach_the_rules() {
        let selector = |text: &str| {
            let mut local = Vec::new();
            let json = SelectorDraft::percentage(text).to_json("stages[0].selector", &mut local);
            (json, local)
        };
        assert_eq!(selector("0.5").0, json!({"percentage": 0.5}));
        assert_eq!(selector("12.25").0, json!({"percentage": 12.25}));
        assert_eq!(selector(".5").0, json!({"percentage": 0.5}));
        let plan = |sel: Value| json!({"stages": [{"selector": sel, "bakeSeconds": 30}]});
        let errors = RolloutPlan::validate_all(&plan(selector("12.345").0));
        assert_eq!(errors[0].message, "must have at most two decimal places");
        let errors = RolloutPlan::validate_all(&plan(selector("lots").0));
        assert_eq!(errors[0].message, "must be a number");
        let (_, local) = selector(" ");
        assert_eq!(local[0].field, "stages[0].selector.percentage");
        assert_eq!(local[0].message, "is required");
    }

    #[test]
    fn text_the_json_cannot_carry_becomes_a_local_error_on_its_field() {
        let mut plan = two_stages();
        edit(
            &mut plan,
            1,
            StageEdit::Selector(SelectorEdit::Kind(SelectorKind::Labels)),
        );
        edit(
            &mut plan,
            1,
            StageEdit::Selector(SelectorEdit::Labels("tier".into())),
        );
        let (_, local) = plan.to_json(false);
        assert_eq!(local[0].field, "stages[1].selector.labels");
        assert_eq!(local[0].message, "\"tier\" is not key=value");
        edit(
            &mut plan,
            0,
            StageEdit::Selector(SelectorEdit::Kind(SelectorKind::NodeGroup)),
        );
        let (_, local) = plan.to_json(false);
        assert_eq!(local[0].field, "stages[0].selector.nodeGroup");
    }

    #[test]
    fn stages_are_added_moved_and_removed_by_key() {
        let mut plan = two_stages();
        plan.apply(PlanEdit::AddStage);
        assert_eq!(plan.keys(), vec![1, 2, 3]);
        plan.apply(PlanEdit::MoveUp(3));
        assert_eq!(plan.keys(), vec![1, 3, 2]);
        plan.apply(PlanEdit::MoveUp(1));
        plan.apply(PlanEdit::MoveDown(2));
        assert_eq!(plan.keys(), vec![1, 3, 2]);
        plan.apply(PlanEdit::MoveDown(1));
        assert_eq!(plan.keys(), vec![3, 1, 2]);
        plan.apply(PlanEdit::Remove(1));
        plan.apply(PlanEdit::Remove(3));
        plan.apply(PlanEdit::Remove(2));
        assert_eq!(plan.keys(), vec![2], "the last stage stays");
        plan.apply(PlanEdit::AddStage);
        assert_eq!(plan.keys(), vec![2, 4], "keys are never reused");
    }

    #[test]
    fn a_plan_stops_growing_at_twenty_stages() {
        let mut plan = PlanDraft::default();
        for _ in 0..30 {
            plan.apply(PlanEdit::AddStage);
        }
        assert_eq!(plan.stages.len(), MAX_STAGES);
        assert!(!plan.can_add());
    }

    #[test]
    fn a_new_stage_copies_the_bake_and_gates_of_the_last_one() {
        let mut plan = two_stages();
        edit(&mut plan, 1, StageEdit::BakeAmount("2".into()));
        edit(&mut plan, 1, StageEdit::BakeUnit(BakeUnit::Hours));
        edit(
            &mut plan,
            1,
            StageEdit::Gate(GateEdit::Toggle(GateKind::ErrorRate, true)),
        );
        plan.apply(PlanEdit::AddStage);
        let (json, _) = plan.to_json(false);
        assert_eq!(json["stages"][2]["bakeSeconds"], json!(7200));
        assert_eq!(
            json["stages"][2]["gates"][1],
            json!({"errorRate": {"maxPercent": 1}})
        );
    }

    #[test]
    fn the_toggles_serialise_under_their_wire_names() {
        let mut plan = PlanDraft::default();
        plan.apply(PlanEdit::AutoAdvance(false));
        plan.apply(PlanEdit::AutoRollback(false));
        let (json, _) = plan.to_json(false);
        assert_eq!(json["autoAdvance"], json!(false));
        assert_eq!(json["autoRollbackOnGateFail"], json!(false));
    }

    #[test]
    fn the_offline_policy_is_written_only_when_one_is_chosen() {
        let mut plan = PlanDraft::default();
        assert!(plan.to_json(false).0.get("offlineNodes").is_none());
        plan.apply(PlanEdit::OfflineNodes(Some(OfflinePolicy::Wait)));
        assert_eq!(plan.to_json(false).0["offlineNodes"], json!("wait"));
        assert!(vf_rules::RolloutPlan::parse(&plan.to_json(false).0).is_ok());
    }
}
