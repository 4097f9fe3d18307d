//! Where each validation error is shown: `stages[2].bakeSeconds` belongs next to stage 3's
//! bake time, `stages[0].gates[1].errorRate.maxPercent` next to stage 1's "Max error %".

use std::collections::BTreeSet;

use serde_json::Value;
use vf_rules::{PlanError, RolloutPlan};

use super::plan_model::PlanDraft;

/// A control (or group of controls) an error can sit next to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The stage list itself (too few or too many stages).
    Stages,
    /// Whatever a stage's selector kind shows: labels, percentage or node group.
    Selector,
    Bake,
    /// A gate without a more specific control (should not happen from this editor).
    Gates,
    MaxErrorPercent,
    MaxDropPercent,
    Query,
    Comparator,
    Threshold,
    AutoAdvance,
    AutoRollback,
    OfflineNodes,
    /// The plan-less canary's health-check window.
    Window,
    /// Anything else: shown at the top of the plan.
    Other,
}

/// An error's place: a stage (0-based) or the plan, and the field within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spot {
    pub stage: Option<usize>,
    pub field: Field,
}

/// Maps a field path from `vf_rules` (or the server, which prefixes `rolloutPlan.`).
pub fn locate(path: &str) -> Spot {
    let path = path.strip_prefix("rolloutPlan.").unwrap_or(path);
    let stage = path
        .strip_prefix("stages[")
        .and_then(|rest| rest.split_once(']'))
        .and_then(|(index, tail)| Some((index.parse::<usize>().ok()?, tail)));
    if let Some((index, tail)) = stage {
        let tail = tail.strip_prefix('.').unwrap_or(tail);
        return Spot {
            stage: Some(index),
            field: stage_field(tail),
        };
    }
    let field = match path {
        "stages" => Field::Stages,
        "autoAdvance" => Field::AutoAdvance,
        "autoRollbackOnGateFail" => Field::AutoRollback,
        "offlineNodes" => Field::OfflineNodes,
        "healthCheckWindowMinutes" => Field::Window,
        p if p.starts_with("canarySelector") => Field::Selector,
        _ => Field::Other,
    };
    Spot { stage: None, field }
}

fn stage_field(tail: &str) -> Field {
    if tail.starts_with("selector") {
        return Field::Selector;
    }
    if tail == "bakeSeconds" {
        return Field::Bake;
    }
    if !tail.starts_with("gates") {
        return Field::Other;
    }
    // gates[j].<kind>.<setting>: the kind names the control, j does not matter.
    match tail.split_once('.').map(|(_, setting)| setting) {
        Some("errorRate.maxPercent") => Field::MaxErrorPercent,
        Some("throughputDrop.maxDropPercent") => Field::MaxDropPercent,
        Some("customPromQL.query") => Field::Query,
        Some("customPromQL.comparator") => Field::Comparator,
        Some("customPromQL.threshold") => Field::Threshold,
        _ => Field::Gates,
    }
}

/// What the operator reads next to the control: its label, then the rule's message, with
/// the unit the rules leave implicit.
fn display(path: &str, spot: Spot, message: &str) -> String {
    let last = path.rsplit('.').next().unwrap_or(path);
    let label = match spot.field {
        Field::Selector if path.contains(".labels") => "Labels",
        Field::Selector if last == "percentage" => "Percentage",
        Field::Selector if last == "nodeGroup" => "Node group",
        Field::Selector => "Selector",
        Field::Bake => "Bake time",
        Field::MaxErrorPercent => "Max error %",
        Field::MaxDropPercent => "Max drop %",
        Field::Query => "Query",
        Field::Comparator => "Comparator",
        Field::Threshold => "Threshold",
        Field::Stages => "Stages",
        Field::AutoAdvance => "Auto-advance",
        Field::AutoRollback => "Auto-rollback on gate failure",
        Field::OfflineNodes => "Offline nodes",
        Field::Window => "Health-check window",
        Field::Gates | Field::Other => return format!("{path}: {message}"),
    };
    let unit = match spot.field {
        Field::Bake if message == "must be at most 86400" => " seconds (24 hours)",
        Field::Bake => " seconds",
        Field::Window if message.ends_with(" 1") => " minute",
        Field::Window => " minutes",
        _ => "",
    };
    let bound = message.starts_with("must be at least ") || message.starts_with("must be at most ");
    let unit = if bound { unit } else { "" };
    format!("{label}: {message}{unit}")
}

/// Every error of a draft, placed; one message per field path (the editor's own come first,
/// so "\"tier\" is not key=value" wins over the rules' "must have at least one label").
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldErrors(Vec<(Spot, String)>);

impl FieldErrors {
    pub fn new(errors: impl IntoIterator<Item = PlanError>) -> FieldErrors {
        let mut seen = BTreeSet::new();
        let placed = errors
            .into_iter()
            .filter(|e| seen.insert(e.field.clone()))
            .map(|e| {
                let spot = locate(&e.field);
                (spot, display(&e.field, spot, &e.message))
            })
            .collect();
        FieldErrors(placed)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The messages for one control, joined; `None` when it is fine.
    pub fn at(&self, stage: Option<usize>, field: Field) -> Option<String> {
        let messages: Vec<&str> = (self.0.iter())
            .filter(|(spot, _)| spot.stage == stage && spot.field == field)
            .map(|(_, message)| message.as_str())
            .collect();
        (!messages.is_empty()).then(|| messages.join("; "))
    }
}

/// A plan draft as JSON, checked by `vf_rules` on every change.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedPlan {
    pub json: Value,
    pub errors: FieldErrors,
}

impl CheckedPlan {
    pub fn new(draft: &PlanDraft, prometheus: bool) -> CheckedPlan {
        let (json, local) = draft.to_json(prometheus);
        let rules = RolloutPlan::validate_all(&json);
        CheckedPlan {
            errors: FieldErrors::new(local.into_iter().chain(rules)),
            json,
        }
    }

    /// Each stage's selector JSON, in order, for the preview.
    pub fn selectors(&self) -> Vec<Value> {
        (self.json["stages"].as_array().into_iter().flatten())
            .map(|stage| stage["selector"].clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::pipeline::deploy::plan_model::{
        GateEdit, GateKind, PlanEdit, SelectorEdit, SelectorKind, StageEdit,
    };

    fn spot(stage: Option<usize>, field: Field) -> Spot {
        Spot { stage, field }
    }

    #[test]
    fn stage_fields_map_to_their_stage_and_control() {
        assert_eq!(locate("stages[2].bakeSeconds"), spot(Some(2), Field::Bake));
        assert_eq!(
            locate("stages[0].selector.percentage"),
            spot(Some(0), Field::Selector)
        );
        assert_eq!(
            locate("stages[1].selector.labels.zone"),
            spot(Some(1), Field::Selector)
        );
        assert_eq!(
            locate("stages[12].selector"),
            spot(Some(12), Field::Selector)
        );
        assert_eq!(
            locate("stages[0].gates[1].errorRate.maxPercent"),
            spot(Some(0), Field::MaxErrorPercent)
        );
        assert_eq!(
            locate("stages[3].gates[0].throughputDrop.maxDropPercent"),
            spot(Some(3), Field::MaxDropPercent)
        );
        assert_eq!(
            locate("stages[0].gates[2].customPromQL.query"),
            spot(Some(0), Field::Query)
        );
        assert_eq!(
            locate("stages[0].gates[2].customPromQL.comparator"),
            spot(Some(0), Field::Comparator)
        );
        assert_eq!(
            locate("stages[0].gates[2].customPromQL.threshold"),
            spot(Some(0), Field::Threshold)
        );
        assert_eq!(
            locate("stages[0].gates[0].healthWindow"),
            spot(Some(0), Field::Gates)
        );
    }

    #[test]
    fn plan_fields_and_server_prefixed_paths_map_too() {
        assert_eq!(locate("stages"), spot(None, Field::Stages));
        assert_eq!(locate("autoAdvance"), spot(None, Field::AutoAdvance));
        assert_eq!(
            locate("autoRollbackOnGateFail"),
            spot(None, Field::AutoRollback)
        );
        assert_eq!(
            locate("rolloutPlan.stages[4].bakeSeconds"),
            spot(Some(4), Field::Bake)
        );
        assert_eq!(
            locate("canarySelector.percentage"),
            spot(None, Field::Selector)
        );
        assert_eq!(
            locate("healthCheckWindowMinutes"),
            spot(None, Field::Window)
        );
        assert_eq!(locate("rolloutPlan"), spot(None, Field::Other));
    }

    #[test]
    fn messages_name_the_control_and_the_unit_the_rules_leave_out() {
        let errors = FieldErrors::new([
            PlanError {
                field: "stages[1].bakeSeconds".into(),
                message: "must be at least 30".into(),
            },
            PlanError {
                field: "stages[0].selector.percentage".into(),
                message: "must be greater than 0".into(),
            },
        ]);
        assert_eq!(
            errors.at(Some(1), Field::Bake).as_deref(),
            Some("Bake time: must be at least 30 seconds")
        );
        assert_eq!(
            errors.at(Some(0), Field::Selector).as_deref(),
            Some("Percentage: must be greater than 0")
        );
        assert_eq!(errors.at(Some(0), Field::Bake), None);
    }

    #[test]
    fn the_health_check_window_bounds_read_in_minutes() {
        let window = |message: &str| {
            FieldErrors::new([PlanError {
                field: "healthCheckWindowMinutes".into(),
                message: message.into(),
            }])
            .at(None, Field::Window)
        };
        assert_eq!(
            window("must be at least 1").as_deref(),
            Some("Health-check window: must be at least 1 minute")
        );
        assert_eq!(
            window("must be at most 1440").as_deref(),
            Some("Health-check window: must be at most 1440 minutes")
        );
    }

    #[test]
    fn a_checked_plan_puts_each_rule_error_beside_its_stage_control() {
        let mut draft = PlanDraft::default();
        draft.apply(PlanEdit::AddStage);
        let second = draft.stages[1].key;
        let first = draft.stages[0].key;
        draft.apply(PlanEdit::Stage(second, StageEdit::BakeAmount("10".into())));
        draft.apply(PlanEdit::Stage(
            second,
            StageEdit::BakeUnit(super::super::plan_model::BakeUnit::Seconds),
        ));
        for e in [
            GateEdit::Toggle(GateKind::ErrorRate, true),
            GateEdit::MaxErrorPercent("150".into()),
        ] {
            draft.apply(PlanEdit::Stage(first, StageEdit::Gate(e)));
        }
        let checked = CheckedPlan::new(&draft, false);
        assert_eq!(
            checked.errors.at(Some(1), Field::Bake).as_deref(),
            Some("Bake time: must be at least 30 seconds")
        );
        assert_eq!(
            checked
                .errors
                .at(Some(0), Field::MaxErrorPercent)
                .as_deref(),
            Some("Max error %: must be between 0 and 100")
        );
        assert_eq!(checked.errors.at(Some(0), Field::Bake), None);
    }

    #[test]
    fn the_editor_message_wins_over_the_rules_message_for_the_same_field() {
        let mut draft = PlanDraft::default();
        let key = draft.stages[0].key;
        for e in [
            SelectorEdit::Kind(SelectorKind::Labels),
            SelectorEdit::Labels("tier".into()),
        ] {
            draft.apply(PlanEdit::Stage(key, StageEdit::Selector(e)));
        }
        let checked = CheckedPlan::new(&draft, false);
        assert_eq!(
            checked.errors.at(Some(0), Field::Selector).as_deref(),
            Some("Labels: \"tier\" is not key=value")
        );
    }

    #[test]
    fn a_valid_draft_has_no_errors_and_lists_its_selectors() {
        let checked = CheckedPlan::new(&PlanDraft::default(), true);
        assert!(checked.errors.is_empty());
        assert_eq!(
            checked.selectors(),
            vec![serde_json::json!({"percentage": 10})]
        );
    }
}
