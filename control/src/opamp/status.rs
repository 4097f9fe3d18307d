//! A collector's remote-config status and health, as the pipeline process status the rest
//! of VectorFlow reads (fleet view, rollout view, gates) for vf-agents too.

use super::proto::RemoteConfigStatuses;

/// The process status and message recorded for each pipeline of a reported config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStatus {
    pub status: &'static str,
    pub message: Option<String>,
}

/// The collector's last reported health (`ComponentHealth` at the top level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub healthy: bool,
    pub last_error: String,
}

fn non_empty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// APPLIED and healthy (or health not reported): RUNNING. APPLIED but unhealthy: CRASHED
/// with the health error. APPLYING: STARTING. FAILED: CRASHED with the error message.
/// A status the agent left unset: PENDING.
pub fn process_status(
    status: RemoteConfigStatuses,
    error_message: &str,
    health: Option<&Health>,
) -> ProcessStatus {
    match status {
        RemoteConfigStatuses::Applied => match health {
            Some(h) if !h.healthy => ProcessStatus {
                status: "CRASHED",
                message: Some(
                    non_empty(&h.last_error)
                        .unwrap_or_else(|| "the collector reports itself unhealthy".into()),
                ),
            },
            _ => ProcessStatus {
                status: "RUNNING",
                message: None,
            },
        },
        RemoteConfigStatuses::Applying => ProcessStatus {
            status: "STARTING",
            message: None,
        },
        RemoteConfigStatuses::Failed => ProcessStatus {
            status: "CRASHED",
            message: Some(
                non_empty(error_message)
                    .unwrap_or_else(|| "the collector failed to apply the config".into()),
            ),
        },
        RemoteConfigStatuses::Unset => ProcessStatus {
            status: "PENDING",
            message: None,
        },
    }
}

/// The stored name of a remote-config status.
pub fn status_name(status: RemoteConfigStatuses) -> &'static str {
    match status {
        RemoteConfigStatuses::Unset => "UNSET",
        RemoteConfigStatuses::Applied => "APPLIED",
        RemoteConfigStatuses::Applying => "APPLYING",
        RemoteConfigStatuses::Failed => "FAILED",
    }
}

/// Reads a stored name back; anything else is UNSET.
pub fn parse_status_name(name: &str) -> RemoteConfigStatuses {
    match name {
        "APPLIED" => RemoteConfigStatuses::Applied,
        "APPLYING" => RemoteConfigStatuses::Applying,
        "FAILED" => RemoteConfigStatuses::Failed,
        _ => RemoteConfigStatuses::Unset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy(ok: bool, err: &str) -> Health {
        Health {
            healthy: ok,
            last_error: err.into(),
        }
    }

    #[test]
    fn applied_and_healthy_is_running() {
        let s = process_status(RemoteConfigStatuses::Applied, "", Some(&healthy(true, "")));
        assert_eq!((s.status, s.message), ("RUNNING", None));
        assert_eq!(
            process_status(RemoteConfigStatuses::Applied, "", None).status,
            "RUNNING"
        );
    }

    #[test]
    fn applied_but_unhealthy_is_crashed_with_the_health_error() {
        let s = process_status(
            RemoteConfigStatuses::Applied,
            "",
            Some(&healthy(false, "exporter otlp: connection refused")),
        );
        assert_eq!(s.status, "CRASHED");
        assert_eq!(
            s.message.as_deref(),
            Some("exporter otlp: connection refused")
        );
    }

    #[test]
    fn applying_is_starting() {
        assert_eq!(
            process_status(RemoteConfigStatuses::Applying, "", None).status,
            "STARTING"
        );
    }

    #[test]
    fn failed_is_crashed_with_the_error_message() {
        let s = process_status(
            RemoteConfigStatuses::Failed,
            "unknown receiver type \"foo\"",
            Some(&healthy(true, "")),
        );
        assert_eq!(s.status, "CRASHED");
        assert_eq!(s.message.as_deref(), Some("unknown receiver type \"foo\""));
        let blank = process_status(RemoteConfigStatuses::Failed, " ", None);
        assert!(blank.message.unwrap().contains("failed to apply"));
    }

    #[test]
    fn status_names_round_trip() {
        for s in [
            RemoteConfigStatuses::Unset,
            RemoteConfigStatuses::Applied,
            RemoteConfigStatuses::Applying,
            RemoteConfigStatuses::Failed,
        ] {
            assert_eq!(parse_status_name(status_name(s)), s);
        }
    }
}
