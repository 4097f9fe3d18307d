//! Rollout plan files, YAML or JSON, in the format of docs/rollouts.md. Checked here with
//! the server's own rules (`vf-rules`), so `vfctl plan validate` and a refused deploy name
//! the same field with the same words, without a server.

use std::path::Path;

use serde_json::Value;
use vf_rules::RolloutPlan;

use crate::api::CliError;

/// The plan in `path` as the server takes it (`rollout_plan`), once it passed the rules.
pub fn read(path: &Path) -> Result<Value, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    check(&text).map_err(|problem| CliError::Input(format!("{}: {problem}", path.display())))
}

/// The plan `text` says, or the first problem: `rolloutPlan.stages[0].bakeSeconds: ...` (as
/// the server words it) or the YAML's line and column.
pub fn check(text: &str) -> Result<Value, String> {
    let value = vf_rules::config::yaml_to_json(text).map_err(|e| e.to_string())?;
    RolloutPlan::parse(&value).map_err(|e| format!("rolloutPlan.{e}"))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_in_yaml_passes_and_a_bad_one_names_its_field() {
        let good = "stages:\n  - selector: {percentage: 10}\n    bakeSeconds: 60\n    gates:\n      - errorRate: {maxPercent: 1}\n";
        let plan = check(good).expect("a valid plan");
        assert_eq!(plan["stages"][0]["bakeSeconds"], 60);
        let bad = good.replace("bakeSeconds: 60", "bakeSeconds: 5");
        let problem = check(&bad).expect_err("too short a bake");
        assert!(
            problem.starts_with("rolloutPlan.stages[0].bakeSeconds"),
            "{problem}"
        );
        let broken = check("stages: [").expect_err("not YAML");
        assert!(broken.starts_with("line "), "{broken}");
    }
}
