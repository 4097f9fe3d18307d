//! Checks a config passes before a version of it exists, besides parsing
//! ([`vf_rules::config`], in [`crate::pipelines::parse_config`]): it must differ from the
//! deployed version and from the canary in flight, and, when `VF_CONFIG_VALIDATE_COMMAND` is
//! set, the validator command must accept it.

use std::process::Stdio;
use std::time::Duration;

use crate::pipelines::{get_version, PipelineRow};
use crate::releases::in_flight_row;
use crate::{ControlError, Db, Result};

/// `VF_CONFIG_VALIDATE_COMMAND`: run by `sh -c` with `{file}` replaced by the path of a file
/// holding the config (for example `vector validate --no-environment {file}`); exit 0
/// accepts it. `VF_CONFIG_VALIDATE_TIMEOUT_MS` bounds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValidator {
    pub command: String,
    pub timeout: Duration,
}

/// Output of a refusing validator shown to the operator, at most.
const MAX_OUTPUT_CHARS: usize = 2000;

/// Refuses a config identical to the pipeline's deployed version or to the canary of its
/// in-flight release: publishing it would make a version that changes nothing.
pub async fn refuse_identical(db: &Db, pipeline: &PipelineRow, config: &str) -> Result<()> {
    let in_flight = in_flight_row(&db.pool, &pipeline.id).await?;
    let candidates = [
        pipeline
            .deployed_version
            .map(|v| (v, "the deployed version")),
        in_flight.map(|r| (r.canary_version, "the canary in flight")),
    ];
    for (version, what) in candidates.into_iter().flatten() {
        if get_version(db, &pipeline.id, version).await?.config_yaml == config {
            return Err(ControlError::invalid(
                "configYaml",
                format!("identical to v{version}, {what}; change something first"),
            ));
        }
    }
    Ok(())
}

/// Runs the validator on `config`, when one is set; its refusal names the exit status and
/// shows what it printed.
pub async fn validate(validator: Option<&ConfigValidator>, config: &str) -> Result<()> {
    let Some(validator) = validator else {
        return Ok(());
    };
    let dir = tempfile::tempdir().map_err(|e| internal("creating its temporary directory", e))?;
    let file = dir.path().join("pipeline.yaml");
    tokio::fs::write(&file, config)
        .await
        .map_err(|e| internal("writing the config for it", e))?;
    let quoted = format!("'{}'", file.display().to_string().replace('\'', r"'\''"));
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(validator.command.replace("{file}", &quoted))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| internal("starting it", e))?;
    let output = match tokio::time::timeout(validator.timeout, child.wait_with_output()).await {
        Err(_) => {
            return Err(ControlError::invalid(
                "configYaml",
                format!(
                    "the config validator did not finish within {} ms",
                    validator.timeout.as_millis()
                ),
            ))
        }
        Ok(output) => output.map_err(|e| internal("waiting for it", e))?,
    };
    if output.status.success() {
        return Ok(());
    }
    let mut printed = String::from_utf8_lossy(&output.stdout).into_owned();
    printed.push_str(&String::from_utf8_lossy(&output.stderr));
    let printed = printed.trim();
    let shown: String = printed.chars().take(MAX_OUTPUT_CHARS).collect();
    let status = match output.status.code() {
        Some(code) => format!("exit {code}"),
        None => "killed by a signal".to_owned(),
    };
    Err(ControlError::invalid(
        "configYaml",
        format!("the config validator refused it ({status}): {shown}"),
    ))
}

fn internal(doing: &str, e: std::io::Error) -> ControlError {
    ControlError::Internal(anyhow::anyhow!("config validator: {doing}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validator(command: &str, timeout_ms: u64) -> ConfigValidator {
        ConfigValidator {
            command: command.into(),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    fn refusal(result: Result<()>) -> String {
        match result {
            Err(ControlError::Invalid { field, message }) => format!("{field}: {message}"),
            other => panic!("not refused as invalid: {other:?}"),
        }
    }

    #[tokio::test]
    async fn without_a_validator_every_config_passes() {
        assert!(validate(None, "anything: 1\n").await.is_ok());
    }

    #[tokio::test]
    async fn the_validator_reads_the_config_from_its_file_and_its_refusal_is_shown() {
        let v = validator(
            "if grep -q 'hello:' {file}; then echo \"unknown component 'hello'\"; exit 78; fi",
            5_000,
        );
        assert!(validate(Some(&v), "sources: {}\n").await.is_ok());
        assert_eq!(
            refusal(validate(Some(&v), "hello: world\n").await),
            "configYaml: the config validator refused it (exit 78): unknown component 'hello'"
        );
    }

    #[tokio::test]
    async fn a_validator_that_hangs_is_stopped_at_its_timeout() {
        let v = validator("sleep 5", 100);
        assert_eq!(
            refusal(validate(Some(&v), "a: 1\n").await),
            "configYaml: the config validator did not finish within 100 ms"
        );
    }
}
