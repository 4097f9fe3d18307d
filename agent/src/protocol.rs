//! Wire types of the vf-agent HTTP + JSON protocol (SPEC section 4).
//!
//! The server parses the same types, so an agent and the control plane can never disagree on
//! a field name. Every field an agent may omit is optional, and unknown fields are ignored
//! (serde's default), so older and newer agents keep working.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
}
