//! vf-agent: the node agent of VectorFlow. Enrolls with the control plane, polls for the
//! pipelines this node should run, runs them (or simulates them), and reports their state.
//!
//! The library is what the server's integration tests drive: `Agent::poll_once` is one
//! deterministic step, `Agent::run` the production loop around it.

mod agent;
pub mod answers;
mod backoff;
mod checksum;
mod client;
mod crash;
mod directive;
mod error;
mod files;
mod identity;
mod last_good;
mod options;
mod process;
pub mod push;
mod reconcile;
mod runner;
mod sim_counters;
mod simulate;
mod slot;
mod status;
mod tap;
pub mod template;
pub mod update;

pub use agent::{Agent, ApplySummary, Exit, PollOutcome, DEFAULT_POLL_INTERVAL};
pub use backoff::{backoff_delay, retry_delay, MAX_DELAY};
pub use checksum::sha256_hex;
pub use client::{ConfigPoll, ServerClient};
pub use crash::CrashPolicy;
pub use error::{AgentError, Result};
pub use options::AgentOptions;
pub use sim_counters::{SimSettings, BYTES_PER_EVENT};
pub use simulate::{SimulationOptions, Simulator};
pub use status::{PipelineStatus, RunningPipeline};

/// What the unit tests of several modules build alike.
#[cfg(test)]
pub(crate) mod test_support {
    use vf_protocol::PipelineConfig;

    use crate::checksum::sha256_hex;

    /// A served config of `yaml` with its correct checksum.
    pub fn config(id: &str, version: i64, yaml: &str) -> PipelineConfig {
        PipelineConfig {
            pipeline_id: id.into(),
            pipeline_name: format!("{id} name"),
            version,
            config_yaml: yaml.into(),
            checksum: sha256_hex(yaml),
            log_level: None,
        }
    }
}
