//! How to start an agent; the CLI fills this from flags, tests build it directly.

use std::{collections::BTreeMap, fmt, path::PathBuf, time::Duration};

use crate::crash::CrashPolicy;
use crate::update::{DeploymentMode, UpdateKey};

/// Everything `Agent::start` needs.
#[derive(Clone)]
pub struct AgentOptions {
    /// Base URL of the control plane, e.g. `http://127.0.0.1:3000`.
    pub server_url: String,
    /// Environment enrollment token; only used when `data_dir` holds no identity yet.
    pub enrollment_token: String,
    /// Holds `identity.json` and `pipelines/<pipelineId>.yaml`.
    pub data_dir: PathBuf,
    pub hostname: String,
    pub labels: BTreeMap<String, String>,
    /// Command template run per pipeline, `{config}` replaced by the YAML path, e.g.
    /// `vector --config {config}`. `None` only records configs and reports them RUNNING.
    pub command: Option<String>,
    /// Overrides the server's `pollIntervalMs` (tests, load generation).
    pub poll_interval_override: Option<Duration>,
    /// Holds the push stream the config names (`pushUrl`) open and polls as soon as it says
    /// the config changed.
    pub push: bool,
    pub agent_version: String,
    /// When a version counts as healthy and how many failed exits make the agent go back to
    /// the last healthy one; only used with `command`.
    pub crash_policy: CrashPolicy,
    /// The publisher key self-updates must be signed with (`--update-public-key`); without
    /// one an update is checked by its sha256 only.
    pub update_key: Option<UpdateKey>,
    /// A root certificate trusted besides the system's, for the server and for update
    /// downloads (`--ca-file`): a private CA, or a test's self-signed server.
    pub extra_root: Option<reqwest::Certificate>,
    /// How the agent is deployed; `None` detects it ([`DeploymentMode::detect`]).
    pub deployment_mode: Option<DeploymentMode>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            server_url: "http://127.0.0.1:3000".to_string(),
            enrollment_token: String::new(),
            data_dir: PathBuf::from("./data"),
            hostname: "localhost".to_string(),
            labels: BTreeMap::new(),
            command: None,
            poll_interval_override: None,
            push: true,
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
            crash_policy: CrashPolicy::default(),
            update_key: None,
            extra_root: None,
            deployment_mode: None,
        }
    }
}

/// Hand-written so the enrollment token never reaches a log line.
impl fmt::Debug for AgentOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentOptions")
            .field("server_url", &self.server_url)
            .field("enrollment_token", &"<redacted>")
            .field("data_dir", &self.data_dir)
            .field("hostname", &self.hostname)
            .field("labels", &self.labels)
            .field("command", &self.command)
            .field("poll_interval_override", &self.poll_interval_override)
            .field("agent_version", &self.agent_version)
            .field("crash_policy", &self.crash_policy)
            .field("update_key", &self.update_key)
            .field("extra_root", &self.extra_root.is_some())
            .field("deployment_mode", &self.deployment_mode)
            .finish()
    }
}
