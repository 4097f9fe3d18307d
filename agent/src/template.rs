//! Per-node templates for simulated fleets: `{i}` is the node index, `{i%K}` the index modulo
//! `K`, so `--label zone=z{i%3}` spreads simulated nodes over three zones.

use std::collections::BTreeMap;

/// A malformed template or `key=value` label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unknown placeholder `{{{0}}}` in `{1}`: use {{i}} or {{i%K}}")]
    UnknownPlaceholder(String, String),
    #[error("unclosed `{{` in `{0}`")]
    Unclosed(String),
    #[error("modulus in `{{i%{0}}}` must be a positive integer")]
    BadModulus(String),
    #[error("label `{0}` must look like key=value with a non-empty key")]
    BadLabel(String),
}

/// Renders `template` for node `index`. Text outside `{...}` is copied as is.
pub fn render(template: &str, index: usize) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| TemplateError::Unclosed(template.to_string()))?;
        out.push_str(&placeholder(&after[..close], index, template)?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn placeholder(name: &str, index: usize, template: &str) -> Result<String, TemplateError> {
    let name = name.trim();
    if name == "i" {
        return Ok(index.to_string());
    }
    let Some(modulus) = name.strip_prefix("i%") else {
        return Err(TemplateError::UnknownPlaceholder(
            name.to_string(),
            template.to_string(),
        ));
    };
    match modulus.trim().parse::<usize>() {
        Ok(k) if k > 0 => Ok((index % k).to_string()),
        _ => Err(TemplateError::BadModulus(modulus.to_string())),
    }
}

/// Renders every label value for node `index`.
pub fn render_labels(
    labels: &BTreeMap<String, String>,
    index: usize,
) -> Result<BTreeMap<String, String>, TemplateError> {
    labels
        .iter()
        .map(|(key, value)| Ok((key.clone(), render(value, index)?)))
        .collect()
}

/// Parses one `--label key=value` flag.
pub fn parse_label(raw: &str) -> Result<(String, String), TemplateError> {
    match raw.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err(TemplateError::BadLabel(raw.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_placeholder_is_replaced_by_the_node_index() {
        assert_eq!(render("sim-{i}", 7).unwrap(), "sim-7");
    }

    #[test]
    fn modulo_placeholder_cycles_through_k_values() {
        let zones: Vec<_> = (0..4).map(|i| render("z{i%3}", i).unwrap()).collect();
        assert_eq!(zones, ["z0", "z1", "z2", "z0"]);
    }

    #[test]
    fn text_without_placeholders_is_copied_unchanged() {
        assert_eq!(render("wave-a", 3).unwrap(), "wave-a");
    }

    #[test]
    fn several_placeholders_in_one_value_are_all_replaced() {
        assert_eq!(render("{i}-{i%2}", 5).unwrap(), "5-1");
    }

    #[test]
    fn unknown_placeholder_is_rejected() {
        assert!(matches!(
            render("x{j}", 1),
            Err(TemplateError::UnknownPlaceholder(..))
        ));
    }

    #[test]
    fn zero_or_non_numeric_modulus_is_rejected() {
        assert!(matches!(
            render("{i%0}", 1),
            Err(TemplateError::BadModulus(_))
        ));
        assert!(matches!(
            render("{i%x}", 1),
            Err(TemplateError::BadModulus(_))
        ));
    }

    #[test]
    fn unclosed_brace_is_rejected() {
        assert!(matches!(
            render("sim-{i", 1),
            Err(TemplateError::Unclosed(_))
        ));
    }

    #[test]
    fn label_values_are_rendered_per_node() {
        let labels = BTreeMap::from([
            ("rollout-wave".to_string(), "a".to_string()),
            ("zone".to_string(), "z{i%3}".to_string()),
        ]);
        let rendered = render_labels(&labels, 4).unwrap();
        assert_eq!(rendered["zone"], "z1");
        assert_eq!(rendered["rollout-wave"], "a");
    }

    #[test]
    fn label_flag_splits_on_the_first_equals_sign() {
        assert_eq!(
            parse_label("query=a=b").unwrap(),
            ("query".to_string(), "a=b".to_string())
        );
    }

    #[test]
    fn label_flag_without_key_or_equals_is_rejected() {
        assert!(parse_label("novalue").is_err());
        assert!(parse_label("=v").is_err());
    }
}
