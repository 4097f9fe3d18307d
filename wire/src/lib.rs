//! vf-protocol: the vf-agent wire protocol (SPEC section 4), the HTTP + JSON routes under
//! `/api/agent/` that vf-agent speaks to the control plane. Here are the JSON bodies of
//! every route and the route paths; the agent (`vf-agent`) sends and reads them, the server
//! (`vf-control`, `server`) parses and answers them, so the two sides can never disagree on
//! a field name. Types only: no I/O, no HTTP client or server.
//!
//! Every field an agent may omit is optional, and unknown fields are ignored (serde's
//! default), so older and newer agents keep working. The JSON is the contract: a change to
//! a name or a serde attribute here is a change of the protocol.
//!
//! OpAMP, the other agent protocol, is protobuf and lives with its generated code in
//! `vf-control::opamp`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Every route of the protocol starts with this, and no other route of the server does.
pub const ROUTE_PREFIX: &str = "/api/agent/";
/// `POST`: an [`EnrollRequest`] in, an [`EnrollResponse`] out.
pub const ENROLL_PATH: &str = "/api/agent/enroll";
/// `GET`, or `POST` with a [`Heartbeat`]: a [`ConfigResponse`] out, with an `ETag` (and 304
/// for a matching `If-None-Match`). Authenticated by the node token (`Authorization: Bearer`).
pub const CONFIG_PATH: &str = "/api/agent/config";
/// `POST`: a [`Heartbeat`] in, a [`HeartbeatAck`] out. Authenticated like [`CONFIG_PATH`].
pub const HEARTBEAT_PATH: &str = "/api/agent/heartbeat";
/// `GET`: a `text/event-stream` of [`PushMessage`]s, one per `data:` line, with a
/// `: keepalive` comment at least every 25 s. Authenticated like [`CONFIG_PATH`]. A hint
/// only: the agent re-polls [`CONFIG_PATH`], where delivery is decided.
pub const PUSH_PATH: &str = "/api/agent/push";
/// `POST`: a JSON array of [`PipelineLogs`] in, a [`HeartbeatAck`] out.
pub const LOGS_PATH: &str = "/api/agent/logs";
/// `POST`: [`SampleResults`] in, a [`HeartbeatAck`] out.
pub const SAMPLES_PATH: &str = "/api/agent/samples";
/// `POST`: [`TapEvents`] in, a [`HeartbeatAck`] out.
pub const TAP_EVENTS_PATH: &str = "/api/agent/tap-events";
/// Every route above.
pub const ALL_PATHS: [&str; 7] = [
    ENROLL_PATH,
    CONFIG_PATH,
    HEARTBEAT_PATH,
    PUSH_PATH,
    LOGS_PATH,
    SAMPLES_PATH,
    TAP_EVENTS_PATH,
];

/// `POST /api/agent/enroll` request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EnrollRequest {
    pub token: String,
    pub hostname: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `POST /api/agent/enroll` response. `node_token` is shown this once; the server keeps a hash.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EnrollResponse {
    pub node_id: String,
    pub node_token: String,
    pub environment_id: String,
    pub environment_name: String,
}

/// One pipeline the server wants this node to run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PipelineConfig {
    pub pipeline_id: String,
    pub pipeline_name: String,
    pub version: i64,
    pub config_yaml: String,
    pub checksum: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
}

/// `GET|POST /api/agent/config` response. A pipeline absent from `pipelines` must be stopped.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigResponse {
    pub pipelines: Vec<PipelineConfig>,
    pub poll_interval_ms: i64,
    pub secret_backend: String,
    /// Where to open the push stream ([`PUSH_PATH`], absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_url: Option<String>,
    /// Sample requests waiting for this node, for agents without a push connection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sample_requests: Vec<SampleRequest>,
}

/// A request for up to `limit` events from each of `component_keys` of a pipeline, answered
/// with [`SampleResults`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SampleRequest {
    pub request_id: String,
    pub pipeline_id: String,
    pub component_keys: Vec<String>,
    pub limit: i64,
}

/// One message of the push stream, by its `type`. An agent ignores a type it does not know.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum PushMessage {
    /// The config this node is served changed: poll [`CONFIG_PATH`] now.
    ConfigChanged {
        pipeline_id: String,
        #[serde(default)]
        reason: String,
    },
    /// Poll at this interval from now on.
    PollInterval {
        interval_ms: i64,
    },
    /// Send a sample of events ([`SAMPLES_PATH`]).
    SampleRequest {
        request_id: String,
        pipeline_id: String,
        component_keys: Vec<String>,
        limit: i64,
    },
    /// Stream the events of one component ([`TAP_EVENTS_PATH`]) until [`PushMessage::TapStop`].
    TapStart {
        request_id: String,
        pipeline_id: String,
        component_id: String,
    },
    TapStop {
        request_id: String,
    },
    /// An operator's action on a pipeline of this node: `restart`.
    Action {
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pipeline_id: Option<String>,
    },
}

/// One pipeline's log lines, oldest first: an element of the [`LOGS_PATH`] body.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PipelineLogs {
    pub pipeline_id: String,
    pub lines: Vec<String>,
}

/// `POST /api/agent/samples` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SampleResults {
    pub results: Vec<SampleResult>,
}

/// The answer to one [`SampleRequest`] for one component: its events and the fields they
/// showed, or why there are none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SampleResult {
    pub request_id: String,
    pub component_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Vec<SchemaField>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A field seen in sampled events: its path (`.message`), type and an example value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SchemaField {
    pub path: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<serde_json::Value>,
}

/// `POST /api/agent/tap-events` body: events a tap saw, or its end (`status`, `reason`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TapEvents {
    pub request_id: String,
    pub pipeline_id: String,
    pub component_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How the agent itself is doing, inside a heartbeat.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentHealth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_errors_total: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_reconnects_total: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_errors_total: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_connected: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipelines_running: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<i64>,
}

/// Per-pipeline report inside a heartbeat. Counters are cumulative since the process started.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PipelineReport {
    pub pipeline_id: String,
    pub version: i64,
    /// `RUNNING`, `STARTING`, `STOPPED`, `CRASHED`, `PENDING`, or anything newer agents send.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_in: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_out: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors_total: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_discarded: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_in: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_out: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_checksum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent_logs: Option<Vec<String>>,
    /// Per component counters, as the agent reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_metrics: Option<serde_json::Value>,
    /// A served version the agent gave up on because it crashed repeatedly. While set, the
    /// report's own `version` and `status` describe what actually runs: the last version that
    /// ran healthily, or (when there is none) the failed version itself as `CRASHED`. The agent
    /// drops it once the server serves a different version or checksum for the pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_version: Option<FailedVersion>,
}

/// Why a served pipeline version is not running: the agent tried it, saw its process fail
/// too often, and will not retry it until the server serves something else.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailedVersion {
    /// The served version that failed (the pipeline's `version` numbering).
    pub version: i64,
    /// `CRASHED`; a string so newer agents can name other ways a version fails.
    pub status: String,
    /// For operators, under 500 characters: how many exits in which window, the last exit
    /// code or signal, and the last line the process printed.
    pub reason: String,
}

/// `POST /api/agent/heartbeat` body, also accepted as the body of `POST /api/agent/config`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    #[serde(default)]
    pub pipelines: Vec<PipelineReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_metrics: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_health: Option<AgentHealth>,
    /// Answers to sample requests, as [`SAMPLES_PATH`] takes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_results: Option<Vec<SampleResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_as: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_error: Option<String>,
}

/// `POST /api/agent/heartbeat` response: `{"ok":true}`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeartbeatAck {
    pub ok: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_route_is_under_the_prefix() {
        for path in ALL_PATHS {
            assert!(path.starts_with(ROUTE_PREFIX), "{path}");
        }
    }

    #[test]
    fn fields_are_camel_case_and_absent_options_are_left_out() {
        let request = EnrollRequest {
            token: "t".into(),
            hostname: "edge-1".into(),
            os: None,
            agent_version: Some("0.1.0".into()),
            vector_version: None,
            labels: None,
        };
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"token":"t","hostname":"edge-1","agentVersion":"0.1.0"}"#
        );
        let report = PipelineReport {
            pipeline_id: "p".into(),
            version: 3,
            status: "RUNNING".into(),
            events_in: Some(1),
            ..PipelineReport::default()
        };
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            json!({"pipelineId": "p", "version": 3, "status": "RUNNING", "eventsIn": 1})
        );
        assert_eq!(
            serde_json::to_string(&HeartbeatAck { ok: true }).unwrap(),
            r#"{"ok":true}"#
        );
    }

    #[test]
    fn failed_version_is_sent_as_a_camel_case_object_and_may_be_absent() {
        let report = PipelineReport {
            pipeline_id: "p".into(),
            version: 1,
            status: "RUNNING".into(),
            failed_version: Some(FailedVersion {
                version: 2,
                status: "CRASHED".into(),
                reason: "exited 3 times within 60 s".into(),
            }),
            ..PipelineReport::default()
        };
        let sent = serde_json::to_value(&report).unwrap();
        assert_eq!(
            sent,
            json!({"pipelineId": "p", "version": 1, "status": "RUNNING", "failedVersion":
                {"version": 2, "status": "CRASHED", "reason": "exited 3 times within 60 s"}})
        );
        assert_eq!(
            serde_json::from_value::<PipelineReport>(sent).unwrap(),
            report
        );
        let older: PipelineReport =
            serde_json::from_str(r#"{"pipelineId":"p","version":1,"status":"RUNNING"}"#).unwrap();
        assert_eq!(older.failed_version, None);
    }

    #[test]
    fn a_heartbeat_may_be_empty_and_unknown_fields_are_ignored() {
        let hb: Heartbeat = serde_json::from_str(r#"{"fromTheFuture":1}"#).unwrap();
        assert_eq!(hb, Heartbeat::default());
    }

    #[test]
    fn push_messages_are_tagged_by_snake_case_type_with_camel_case_fields() {
        let cases = [
            (
                PushMessage::ConfigChanged {
                    pipeline_id: "p".into(),
                    reason: "rollback".into(),
                },
                json!({"type": "config_changed", "pipelineId": "p", "reason": "rollback"}),
            ),
            (
                PushMessage::PollInterval { interval_ms: 5000 },
                json!({"type": "poll_interval", "intervalMs": 5000}),
            ),
            (
                PushMessage::SampleRequest {
                    request_id: "r".into(),
                    pipeline_id: "p".into(),
                    component_keys: vec!["in".into()],
                    limit: 5,
                },
                json!({"type": "sample_request", "requestId": "r", "pipelineId": "p",
                    "componentKeys": ["in"], "limit": 5}),
            ),
            (
                PushMessage::TapStart {
                    request_id: "r".into(),
                    pipeline_id: "p".into(),
                    component_id: "in".into(),
                },
                json!({"type": "tap_start", "requestId": "r", "pipelineId": "p", "componentId": "in"}),
            ),
            (
                PushMessage::TapStop {
                    request_id: "r".into(),
                },
                json!({"type": "tap_stop", "requestId": "r"}),
            ),
            (
                PushMessage::Action {
                    action: "restart".into(),
                    pipeline_id: Some("p".into()),
                },
                json!({"type": "action", "action": "restart", "pipelineId": "p"}),
            ),
        ];
        for (message, wire) in cases {
            assert_eq!(serde_json::to_value(&message).unwrap(), wire);
            assert_eq!(
                serde_json::from_value::<PushMessage>(wire).unwrap(),
                message
            );
        }
    }

    #[test]
    fn sample_results_name_the_schema_type_field_type() {
        let body: SampleResults = serde_json::from_value(json!({"results": [{
            "requestId": "r", "componentKey": "in", "events": [{"message": "hi"}],
            "schema": [{"path": ".message", "type": "string", "sample": "hi"}]
        }]}))
        .unwrap();
        let field = &body.results[0].schema.as_ref().unwrap()[0];
        assert_eq!(field.kind, "string");
        assert_eq!(body.results[0].error, None);
    }

    #[test]
    fn a_config_without_push_or_pending_samples_reads_as_before() {
        let config = ConfigResponse {
            pipelines: vec![],
            poll_interval_ms: 5000,
            secret_backend: "BUILTIN".into(),
            push_url: None,
            sample_requests: vec![],
        };
        assert_eq!(
            serde_json::to_value(&config).unwrap(),
            json!({"pipelines": [], "pollIntervalMs": 5000, "secretBackend": "BUILTIN"})
        );
    }
}
