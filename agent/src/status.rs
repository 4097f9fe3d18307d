//! What the agent says about each pipeline, both to the server (`status` strings) and to
//! callers of the library (`RunningPipeline`).

use std::fmt;

/// Process status of one pipeline on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineStatus {
    /// The command is alive (or, without a command, the config is recorded).
    Running,
    /// The command finished with code 0 or was stopped by the agent.
    Stopped,
    /// The command failed, could not start, or the config was refused (e.g. checksum mismatch).
    Crashed,
}

impl PipelineStatus {
    /// The wire spelling used in heartbeats.
    pub fn as_str(self) -> &'static str {
        match self {
            PipelineStatus::Running => "RUNNING",
            PipelineStatus::Stopped => "STOPPED",
            PipelineStatus::Crashed => "CRASHED",
        }
    }
}

impl fmt::Display for PipelineStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One pipeline this agent holds, as tests and operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningPipeline {
    pub pipeline_id: String,
    pub pipeline_name: String,
    pub version: i64,
    pub checksum: String,
    pub status: PipelineStatus,
}
