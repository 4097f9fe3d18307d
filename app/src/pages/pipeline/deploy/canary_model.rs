//! A plan-less canary as typed: one selector (labels or percentage) and a health-check window
//! in minutes, checked with the same rules the server applies to `release.canary.create`.

use serde_json::Value;
use vf_rules::{parse_canary_selector, CanarySelector, Percent, PlanError, RolloutPlan};

use super::plan_model::{problem, SelectorDraft, SelectorEdit};

/// The wire name of the selector field, as the server names it in errors.
pub const SELECTOR_FIELD: &str = "canarySelector";
/// The wire name of the window field.
pub const WINDOW_FIELD: &str = "healthCheckWindowMinutes";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryDraft {
    pub selector: SelectorDraft,
    pub window_minutes: String,
}

impl Default for CanaryDraft {
    fn default() -> CanaryDraft {
        CanaryDraft {
            selector: SelectorDraft::percentage("10"),
            window_minutes: "5".into(),
        }
    }
}

/// One control's change to the canary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanaryEdit {
    Selector(SelectorEdit),
    WindowMinutes(String),
}

/// What the canary would send, and everything wrong with it (empty: it may be sent).
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryRequestParts {
    pub selector: Value,
    pub window_minutes: Option<i64>,
    pub errors: Vec<PlanError>,
}

impl CanaryDraft {
    pub fn apply(&mut self, edit: CanaryEdit) {
        match edit {
            CanaryEdit::Selector(e) => self.selector.apply(e),
            CanaryEdit::WindowMinutes(text) => self.window_minutes = text,
        }
    }

    pub fn request(&self) -> CanaryRequestParts {
        let mut errors = Vec::new();
        let selector = self.selector.to_json(SELECTOR_FIELD, &mut errors);
        if let Err(e) = parse_canary_selector(&selector, SELECTOR_FIELD) {
            errors.push(e);
        }
        let window_minutes = self.window_minutes.trim().parse::<i64>().ok();
        if let Some(message) = window_problem(&self.window_minutes) {
            errors.push(problem(WINDOW_FIELD, message));
        }
        CanaryRequestParts {
            selector,
            window_minutes,
            errors,
        }
    }
}

/// The window must be whole minutes from 1 to 1440; the bounds are the rules' own
/// ([`RolloutPlan::planless`]), so the editor and the server cannot disagree.
fn window_problem(text: &str) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return Some("is required".into());
    }
    let Ok(minutes) = text.parse::<i64>() else {
        return Some("must be a whole number of minutes".into());
    };
    let Ok(minutes) = u32::try_from(minutes) else {
        return Some(if minutes < 0 {
            "must be at least 1".into()
        } else {
            "must be at most 1440".into()
        });
    };
    RolloutPlan::planless(CanarySelector::Percentage(Percent::HUNDRED), minutes)
        .err()
        .map(|e| e.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::pipeline::deploy::plan_model::SelectorKind;
    use serde_json::json;

    fn with(edits: &[CanaryEdit]) -> CanaryRequestParts {
        let mut draft = CanaryDraft::default();
        for e in edits {
            draft.apply(e.clone());
        }
        draft.request()
    }

    fn messages(parts: &CanaryRequestParts) -> Vec<String> {
        parts.errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_default_canary_is_ten_percent_for_five_minutes() {
        let parts = with(&[]);
        assert_eq!(parts.selector, json!({"percentage": 10}));
        assert_eq!(parts.window_minutes, Some(5));
        assert!(parts.errors.is_empty());
    }

    #[test]
    fn a_label_canary_sends_its_labels() {
        let parts = with(&[
            CanaryEdit::Selector(SelectorEdit::Kind(SelectorKind::Labels)),
            CanaryEdit::Selector(SelectorEdit::Labels("rollout-wave=1".into())),
        ]);
        assert_eq!(parts.selector, json!({"labels": {"rollout-wave": "1"}}));
        assert!(parts.errors.is_empty());
    }

    #[test]
    fn an_empty_label_selector_is_refused_by_the_rules() {
        let parts = with(&[CanaryEdit::Selector(SelectorEdit::Kind(
            SelectorKind::Labels,
        ))]);
        assert_eq!(
            messages(&parts),
            ["canarySelector.labels: must have at least one label"]
        );
    }

    #[test]
    fn the_health_check_window_is_one_to_1440_whole_minutes() {
        let window = |text: &str| messages(&with(&[CanaryEdit::WindowMinutes(text.into())]));
        assert_eq!(
            window("0"),
            ["healthCheckWindowMinutes: must be at least 1"]
        );
        assert_eq!(
            window("-3"),
            ["healthCheckWindowMinutes: must be at least 1"]
        );
        assert_eq!(
            window("1441"),
            ["healthCheckWindowMinutes: must be at most 1440"]
        );
        assert_eq!(
            window("99999999999"),
            ["healthCheckWindowMinutes: must be at most 1440"]
        );
        assert_eq!(
            window("2.5"),
            ["healthCheckWindowMinutes: must be a whole number of minutes"]
        );
        assert_eq!(window(""), ["healthCheckWindowMinutes: is required"]);
        assert!(window("1440").is_empty());
        assert!(window("1").is_empty());
    }
}
