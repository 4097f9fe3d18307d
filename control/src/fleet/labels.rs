//! Label maps: node labels, node-group criteria and pipeline node selectors share one shape.

use std::collections::BTreeMap;

use crate::{ControlError, Result};

/// A label map, ordered so it serialises deterministically.
pub type Labels = BTreeMap<String, String>;

const MAX_LABELS: usize = 64;

/// Checks a label map from an operator or agent; `field` names it in the error.
pub fn parse_labels(field: &str, labels: Labels) -> Result<Labels> {
    if labels.len() > MAX_LABELS {
        return Err(ControlError::invalid(
            field,
            format!("at most {MAX_LABELS} labels"),
        ));
    }
    for (k, v) in &labels {
        let key_ok = !k.is_empty()
            && k.len() <= 63
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
        if !key_ok {
            return Err(ControlError::invalid(
                format!("{field}.{k}"),
                "label keys are 1-63 characters of letters, digits, '.', '_', '-', '/'",
            ));
        }
        if v.len() > 256 || v.chars().any(|c| c.is_control()) {
            return Err(ControlError::invalid(
                format!("{field}.{k}"),
                "label values are at most 256 characters, no control characters",
            ));
        }
    }
    Ok(labels)
}

/// Reads a stored label map; a corrupt document reads as empty rather than failing a poll.
pub(crate) fn from_json(text: &str) -> Labels {
    serde_json::from_str(text).unwrap_or_default()
}

pub(crate) fn to_json(labels: &Labels) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_key_with_spaces_is_refused_naming_the_key() {
        let err = parse_labels("labels", Labels::from([("bad key".into(), "x".into())]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("labels.bad key:"), "{err}");
    }

    #[test]
    fn ordinary_labels_are_accepted() {
        let labels = Labels::from([("rollout-wave".into(), "a".into())]);
        assert_eq!(parse_labels("labels", labels.clone()).unwrap(), labels);
    }
}
