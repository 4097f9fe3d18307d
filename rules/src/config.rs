//! What a pipeline config must be before a version of it exists: YAML that parses, one
//! document, a mapping at the top. The editor runs the same check as the server, so a
//! problem is marked on its line before anything is sent.
//!
//! Whether the config means anything to Vector is not decided here: the server can run a
//! validator command for that (`VF_CONFIG_VALIDATE_COMMAND`), and refuses a config identical
//! to the deployed or in-flight version (it needs the stored versions to say so).

use saphyr::{LoadableYamlNode, Scalar, Yaml};

/// Why a config was refused, and where: `line` and `column` are 1-based, as an editor shows
/// them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ConfigProblem {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl ConfigProblem {
    fn at_start(message: &str) -> ConfigProblem {
        ConfigProblem {
            line: 1,
            column: 1,
            message: message.to_owned(),
        }
    }
}

/// The YAML documents of `text`, or where it stops being YAML.
fn documents(text: &str) -> Result<Vec<Yaml<'_>>, ConfigProblem> {
    Yaml::load_from_str(text).map_err(|e| ConfigProblem {
        line: e.marker().line().max(1),
        column: e.marker().col() + 1,
        message: e.info().to_owned(),
    })
}

/// Checks that `text` is one YAML document with a mapping at the top.
pub fn check_config_yaml(text: &str) -> Result<(), ConfigProblem> {
    let docs = documents(text)?;
    match docs.as_slice() {
        [] => Err(ConfigProblem::at_start("the config is empty")),
        [doc] if doc.is_mapping() => Ok(()),
        [_] => Err(ConfigProblem::at_start(
            "the config must be a YAML mapping (sources, transforms, sinks, ...)",
        )),
        [_, _, ..] => {
            let line = (text.lines().enumerate().skip(1))
                .find(|(_, l)| l.trim_end() == "---")
                .map_or(1, |(i, _)| i + 1);
            Err(ConfigProblem {
                line,
                column: 1,
                message: "the config must be one YAML document; a second one starts here".into(),
            })
        }
    }
}

/// One YAML (or JSON) document as JSON, for files written in either (a rollout plan read by
/// `vfctl`). Tags are dropped, mapping keys become strings, and a broken document is refused
/// at its line and column as [`check_config_yaml`] refuses it.
pub fn yaml_to_json(text: &str) -> Result<serde_json::Value, ConfigProblem> {
    let docs = documents(text)?;
    match docs.as_slice() {
        [doc] => Ok(json_of(doc)),
        [] => Err(ConfigProblem::at_start("the document is empty")),
        [_, _, ..] => Err(ConfigProblem::at_start(
            "expected one document, found several",
        )),
    }
}

fn json_of(node: &Yaml) -> serde_json::Value {
    use serde_json::Value;
    match node {
        Yaml::Value(Scalar::Null) | Yaml::Alias(_) | Yaml::BadValue => Value::Null,
        Yaml::Value(Scalar::Boolean(b)) => Value::Bool(*b),
        Yaml::Value(Scalar::Integer(i)) => Value::from(*i),
        Yaml::Value(Scalar::FloatingPoint(f)) => {
            serde_json::Number::from_f64(f.into_inner()).map_or(Value::Null, Value::Number)
        }
        Yaml::Value(Scalar::String(s)) | Yaml::Representation(s, _, _) => {
            Value::String(s.to_string())
        }
        Yaml::Sequence(items) => Value::Array(items.iter().map(json_of).collect()),
        Yaml::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match json_of(k) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, json_of(v))
                })
                .collect(),
        ),
        Yaml::Tagged(_, inner) => json_of(inner),
    }
}

/// One component of a config: its section (`sources`, `transforms`, `sinks`) and its key.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Component {
    pub kind: String,
    pub key: String,
}

/// The components a config names, in its order: the keys under `sources`, `transforms` and
/// `sinks`. A config that does not parse names none (the node page offers nothing to sample).
pub fn components(text: &str) -> Vec<Component> {
    let Ok(docs) = documents(text) else {
        return Vec::new();
    };
    let Some(top) = docs.first().and_then(|d| d.as_mapping()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for section in ["sources", "transforms", "sinks"] {
        let found = top
            .iter()
            .find(|(k, _)| k.as_str() == Some(section))
            .and_then(|(_, v)| v.as_mapping());
        for key in found.into_iter().flat_map(|m| m.keys()) {
            if let Some(key) = key.as_str() {
                out.push(Component {
                    kind: section.to_owned(),
                    key: key.to_owned(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_json_documents_read_as_the_same_json() {
        let yaml = "stages:\n  - selector: {percentage: 25}\n    bakeSeconds: 300\n    gates: []\n\
                    autoAdvance: true\nratio: 0.5\nnothing: ~\n";
        let json = r#"{"stages": [{"selector": {"percentage": 25}, "bakeSeconds": 300, "gates": []}],
                       "autoAdvance": true, "ratio": 0.5, "nothing": null}"#;
        let expected = serde_json::json!({
            "stages": [{"selector": {"percentage": 25}, "bakeSeconds": 300, "gates": []}],
            "autoAdvance": true, "ratio": 0.5, "nothing": null,
        });
        assert_eq!(yaml_to_json(yaml), Ok(expected.clone()));
        assert_eq!(yaml_to_json(json), Ok(expected));
        let broken = yaml_to_json("stages: [1, 2\n").expect_err("refused");
        assert_eq!(broken.line, 2);
        assert!(yaml_to_json("").is_err());
    }

    #[test]
    fn components_are_the_keys_of_sources_transforms_and_sinks_in_order() {
        let text = "sources:\n  in: {type: stdin}\n  files: {type: file}\n\
                    transforms:\n  parse: {type: remap, inputs: [in]}\n\
                    sinks:\n  out: {type: console, inputs: [parse]}\n\
                    api: {enabled: true}\n";
        let found: Vec<(String, String)> = components(text)
            .into_iter()
            .map(|c| (c.kind, c.key))
            .collect();
        let expected = [
            ("sources", "in"),
            ("sources", "files"),
            ("transforms", "parse"),
            ("sinks", "out"),
        ];
        assert_eq!(
            found,
            expected.map(|(k, v)| (k.to_owned(), v.to_owned())).to_vec()
        );
        assert!(components("not: [yaml").is_empty());
        assert!(components("- a list\n").is_empty());
        assert!(components("sources: 3\n").is_empty());
    }

    fn problem(text: &str) -> String {
        check_config_yaml(text).expect_err("refused").to_string()
    }

    #[test]
    fn a_mapping_passes() {
        assert_eq!(check_config_yaml("sources:\n  in: {type: stdin}\n"), Ok(()));
        assert_eq!(check_config_yaml("hello: world\n"), Ok(()));
    }

    #[test]
    fn broken_yaml_is_refused_at_its_line_and_column() {
        assert_eq!(
            problem("a: 1\nb: [1, 2\nc: 3\n"),
            "line 3, column 2: illegal placement of ':' indicator"
        );
        let unclosed = check_config_yaml("  : [unclosed").expect_err("refused");
        assert_eq!(unclosed.line, 2);
        assert!(unclosed.message.contains("flow sequence"), "{unclosed}");
        assert_eq!(
            problem("key: \"unterminated\n"),
            "line 1, column 6: while scanning a quoted scalar, found unexpected end of stream"
        );
    }

    #[test]
    fn a_config_is_one_mapping_document() {
        assert_eq!(
            problem("just text\n"),
            "line 1, column 1: the config must be a YAML mapping (sources, transforms, sinks, ...)"
        );
        assert_eq!(
            problem("- a\n- b\n"),
            "line 1, column 1: the config must be a YAML mapping (sources, transforms, sinks, ...)"
        );
        assert_eq!(
            problem("a: 1\n---\nb: 2\n"),
            "line 2, column 1: the config must be one YAML document; a second one starts here"
        );
        assert_eq!(
            problem("# only a comment\n"),
            "line 1, column 1: the config is empty"
        );
    }
}
