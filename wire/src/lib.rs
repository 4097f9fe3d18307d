//! vf-protocol: the vf-agent wire protocol (SPEC section 4), the HTTP + JSON routes under
//! `/api/agent/` that vf-agent speaks to the control plane. Here are the JSON bodies of
//! every route and the route paths; the agent (`vf-agent`) sends and reads them, the server
//! (`vf-control`, `server`) parses and answers them, so the two sides can never disagree on
//! a field name. Types only: no I/O, no HTTP client or server.
//!
//! Every field an agent may omit is optional (absent or `null`), and unknown fields are
//! ignored (serde's default), so older and newer agents keep working. The JSON is the
//! contract: a change to a name or a serde attribute here is a change of the protocol.
//!
//! **Numbers are the protocol's, not ours.** The field list comes from the protocol's
//! reference implementation: every numeric field of a heartbeat, log batch, sample result
//! and tap event is a JSON *number* and may be fractional or written with an exponent
//! (`0.117464567`, `1.5e3`), so it is a [`Number`] here (serde_json's, which keeps an
//! integer exact and a fraction as sent). Only these are integers ([`whole`]):
//! a pipeline config's and a pipeline report's `version` (>= 0), `pid`, a sample request's
//! `limit` (>= 0), `pollIntervalMs` (> 0) and `agentHealth.pipelinesRunning`; an integer
//! may still be written `3.0` or `3e0` (JSON has one number type), never `3.5`. Whether a
//! number can be *used* (a negative counter, one beyond what a counter holds) is the
//! server's call, field by field, and never refuses the whole body.
//!
//! OpAMP, the other agent protocol, is protobuf and lives with its generated code in
//! `vf-control::opamp`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
/// A JSON number: an integer kept exact, or a fraction; never a string, never NaN.
pub use serde_json::Number;

mod object;
pub mod whole;

use object::objects_only;

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
#[serde(remote = "Self")]
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
    #[serde(deserialize_with = "whole::non_negative")]
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
    #[serde(deserialize_with = "whole::positive")]
    pub poll_interval_ms: i64,
    pub secret_backend: String,
    /// Where to open the push stream ([`PUSH_PATH`], absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_url: Option<String>,
    /// Sample requests waiting for this node, for agents without a push connection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sample_requests: Vec<SampleRequest>,
    /// Something the agent itself should do: `self_update` to another build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_action: Option<PendingAction>,
}

/// An action for the agent itself. `self_update`: download `downloadUrl` (https only), check
/// it hashes to `checksum` (`sha256:<hex>`) and, when the agent pins a publisher key, that
/// `signature` (standard base64 ed25519 over the raw 32-byte digest) verifies; replace the
/// binary and restart, then report `targetVersion` as `agentVersion`. An agent that cannot
/// (in a container, a failed check) reports why in `updateError`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PendingAction {
    #[serde(rename = "type")]
    pub kind: String,
    pub target_version: String,
    pub download_url: String,
    pub checksum: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A request for up to `limit` events from each of `component_keys` of a pipeline, answered
/// with [`SampleResults`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SampleRequest {
    pub request_id: String,
    pub pipeline_id: String,
    pub component_keys: Vec<String>,
    #[serde(deserialize_with = "whole::non_negative")]
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
        #[serde(deserialize_with = "whole::positive")]
        interval_ms: i64,
    },
    /// Send a sample of events ([`SAMPLES_PATH`]).
    SampleRequest {
        request_id: String,
        pipeline_id: String,
        component_keys: Vec<String>,
        #[serde(deserialize_with = "whole::non_negative")]
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
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PipelineLogs {
    pub pipeline_id: String,
    pub lines: Vec<String>,
}

/// `POST /api/agent/samples` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct SampleResults {
    pub results: Vec<SampleResult>,
}

/// The answer to one [`SampleRequest`] for one component: its events and the fields they
/// showed, or why there are none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
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
#[serde(remote = "Self")]
pub struct SchemaField {
    pub path: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<serde_json::Value>,
}

/// `POST /api/agent/tap-events` body: events a tap saw, or its end (`status`, `reason`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
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

/// How the agent itself is doing, inside a heartbeat. Counters are cumulative since the
/// agent started; `uptimeSeconds` is fractional (`0.117464567`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct AgentHealth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_errors_total: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_reconnects_total: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_errors_total: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_connected: Option<bool>,
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub pipelines_running: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<Number>,
}

/// Per-pipeline report inside a heartbeat. Counters are cumulative since the process
/// started, as JSON numbers (Vector's own counters are floats).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PipelineReport {
    pub pipeline_id: String,
    #[serde(deserialize_with = "whole::non_negative")]
    pub version: i64,
    /// `RUNNING`, `STARTING`, `STOPPED`, `CRASHED`, `PENDING`, or anything newer agents send.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_in: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_out: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors_total: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_discarded: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_in: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_out: Option<Number>,
    /// OpenTelemetry-style counters some agents add beside the event counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spans_in: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spans_out: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces_in: Option<Number>,
    /// How busy the pipeline is, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<Number>,
    #[serde(
        default,
        deserialize_with = "whole::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub pid: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_checksum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent_logs: Option<Vec<String>>,
    /// Per component counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_metrics: Option<Vec<ComponentMetric>>,
    /// A served version the agent gave up on because it crashed repeatedly. While set, the
    /// report's own `version` and `status` describe what actually runs: the last version that
    /// ran healthily, or (when there is none) the failed version itself as `CRASHED`. The agent
    /// drops it once the server serves a different version or checksum for the pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_version: Option<FailedVersion>,
}

/// One component's counters in a pipeline report (`componentMetrics[]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct ComponentMetric {
    /// The component's key in the config (`sources.in` is `in`).
    pub component_id: String,
    /// `source`, `transform` or `sink`.
    pub component_kind: String,
    pub received_events: Number,
    pub sent_events: Number,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors_total: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discarded_events: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_mean_seconds: Option<Number>,
}

/// The host the agent runs on (`hostMetrics`): every field optional, every one a number.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct HostMetrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_total_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_free_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds_total: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds_idle: Option<Number>,
    #[serde(default, rename = "loadAvg1", skip_serializing_if = "Option::is_none")]
    pub load_avg_1: Option<Number>,
    #[serde(default, rename = "loadAvg5", skip_serializing_if = "Option::is_none")]
    pub load_avg_5: Option<Number>,
    #[serde(default, rename = "loadAvg15", skip_serializing_if = "Option::is_none")]
    pub load_avg_15: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_total_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_used_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_free_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_read_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_written_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_rx_bytes: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_tx_bytes: Option<Number>,
}

impl HostMetrics {
    /// Every field by its protocol name, in the protocol's order.
    pub fn fields(&self) -> [(&'static str, Option<&Number>); 15] {
        [
            ("memoryTotalBytes", self.memory_total_bytes.as_ref()),
            ("memoryUsedBytes", self.memory_used_bytes.as_ref()),
            ("memoryFreeBytes", self.memory_free_bytes.as_ref()),
            ("cpuSecondsTotal", self.cpu_seconds_total.as_ref()),
            ("cpuSecondsIdle", self.cpu_seconds_idle.as_ref()),
            ("loadAvg1", self.load_avg_1.as_ref()),
            ("loadAvg5", self.load_avg_5.as_ref()),
            ("loadAvg15", self.load_avg_15.as_ref()),
            ("fsTotalBytes", self.fs_total_bytes.as_ref()),
            ("fsUsedBytes", self.fs_used_bytes.as_ref()),
            ("fsFreeBytes", self.fs_free_bytes.as_ref()),
            ("diskReadBytes", self.disk_read_bytes.as_ref()),
            ("diskWrittenBytes", self.disk_written_bytes.as_ref()),
            ("netRxBytes", self.net_rx_bytes.as_ref()),
            ("netTxBytes", self.net_tx_bytes.as_ref()),
        ]
    }
}

/// Why a served pipeline version is not running: the agent tried it, saw its process fail
/// too often, and will not retry it until the server serves something else.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct FailedVersion {
    /// The served version that failed (the pipeline's `version` numbering).
    #[serde(deserialize_with = "whole::non_negative")]
    pub version: i64,
    /// `CRASHED`; a string so newer agents can name other ways a version fails.
    pub status: String,
    /// For operators, under 500 characters: how many exits in which window, the last exit
    /// code or signal, and the last line the process printed.
    pub reason: String,
}

/// `POST /api/agent/heartbeat` body, also accepted as the body of `POST /api/agent/config`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self")]
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
    pub host_metrics: Option<HostMetrics>,
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

objects_only!(
    EnrollRequest,
    PipelineReport,
    ComponentMetric,
    HostMetrics,
    AgentHealth,
    FailedVersion,
    Heartbeat,
    PipelineLogs,
    SampleResults,
    SampleResult,
    SchemaField,
    TapEvents,
);

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
            events_in: Some(Number::from(1)),
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
    fn numbers_may_be_fractional_or_written_with_exponents() {
        let hb: Heartbeat = serde_json::from_value(json!({
            "pipelines": [{"pipelineId": "p", "version": 2.0, "status": "RUNNING",
                "eventsIn": 1.5e3, "uptimeSeconds": 0.117464567, "pid": 4.2e1,
                "componentMetrics": [{"componentId": "in", "componentKind": "source",
                    "receivedEvents": 12.5, "sentEvents": 1e2, "latencyMeanSeconds": 2.5e-3}]}],
            "agentHealth": {"uptimeSeconds": 0.117464567, "pollErrorsTotal": 0.0,
                "pushConnected": true, "pipelinesRunning": 1},
            "hostMetrics": {"loadAvg1": 0.42, "memoryUsedBytes": 1.2e9}
        }))
        .unwrap();
        let f = |n: &Option<Number>| n.as_ref().and_then(Number::as_f64);
        let report = &hb.pipelines[0];
        assert_eq!((report.version, report.pid), (2, Some(42)));
        assert_eq!(f(&report.events_in), Some(1500.0));
        assert_eq!(f(&report.uptime_seconds), Some(0.117464567));
        let components = report.component_metrics.as_ref().unwrap();
        assert_eq!(f(&components[0].latency_mean_seconds), Some(0.0025));
        let health = hb.agent_health.unwrap();
        assert_eq!(f(&health.uptime_seconds), Some(0.117464567));
        assert_eq!(health.pipelines_running, Some(1));
        let host = hb.host_metrics.unwrap();
        assert_eq!(
            (f(&host.load_avg_1), f(&host.memory_used_bytes)),
            (Some(0.42), Some(1.2e9))
        );
        let exact: PipelineReport = serde_json::from_str(
            r#"{"pipelineId": "p", "version": 1, "status": "RUNNING", "eventsIn": 9223372036854775807}"#,
        )
        .unwrap();
        assert_eq!(
            exact.events_in.and_then(|n| n.as_i64()),
            Some(i64::MAX),
            "integers stay exact"
        );
    }

    #[test]
    fn an_array_is_never_read_as_an_object() {
        let err = |json: &str| {
            serde_json::from_str::<Heartbeat>(json)
                .unwrap_err()
                .to_string()
        };
        assert!(
            err("[]").contains("expected a JSON object"),
            "{}",
            err("[]")
        );
        assert!(err(r#"{"hostMetrics": [1, 2]}"#).contains("expected a JSON object"));
        assert!(err(r#"{"pipelines": [["p", 1, "RUNNING"]]}"#).contains("expected a JSON object"));
        assert!(serde_json::from_str::<Vec<PipelineLogs>>("[[\"p\", []]]").is_err());
    }

    #[test]
    fn nulls_stand_for_absent_optional_fields() {
        let hb: Heartbeat = serde_json::from_value(json!({
            "pipelines": [{"pipelineId": "p", "version": 1, "status": "RUNNING",
                "eventsIn": null, "pid": null, "componentMetrics": null}],
            "agentHealth": null, "hostMetrics": null, "sampleResults": null, "labels": null
        }))
        .unwrap();
        assert_eq!(hb.pipelines[0].events_in, None);
        assert_eq!(hb.pipelines[0].pid, None);
        assert_eq!(hb.agent_health, None);
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
    fn a_pending_self_update_reads_as_the_protocol_writes_it() {
        let config: ConfigResponse = serde_json::from_value(json!({
            "pipelines": [], "pollIntervalMs": 5000, "secretBackend": "BUILTIN",
            "pendingAction": {"type": "self_update", "targetVersion": "1.5.0",
                "downloadUrl": "https://vf.example/agent", "checksum": "sha256:ab"}
        }))
        .unwrap();
        let action = config.pending_action.unwrap();
        assert_eq!(
            (action.kind.as_str(), action.signature),
            ("self_update", None)
        );
        assert_eq!(action.target_version, "1.5.0");
    }

    #[test]
    fn a_config_without_push_or_pending_samples_reads_as_before() {
        let config = ConfigResponse {
            pipelines: vec![],
            poll_interval_ms: 5000,
            secret_backend: "BUILTIN".into(),
            push_url: None,
            sample_requests: vec![],
            pending_action: None,
        };
        assert_eq!(
            serde_json::to_value(&config).unwrap(),
            json!({"pipelines": [], "pollIntervalMs": 5000, "secretBackend": "BUILTIN"})
        );
    }
}
