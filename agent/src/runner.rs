//! One applied pipeline version: its file on disk plus whatever executes it (a real command, a
//! simulated counter set, or nothing), and the report it produces for each heartbeat.

use std::time::{Duration, Instant};

use vf_protocol::{PipelineConfig, PipelineReport};

use crate::{
    files::{PipelineFiles, PipelineId},
    process::PipelineProcess,
    reconcile::Applied,
    sim_counters::{SimCounters, SimSettings},
    status::{PipelineStatus, RunningPipeline},
};

/// How this agent executes pipelines.
#[derive(Debug, Clone)]
pub enum RunMode {
    /// Record the config and report it RUNNING.
    Record,
    /// Run this command template per pipeline.
    Command(String),
    /// Report synthetic counters.
    Simulate(SimSettings),
}

#[derive(Debug)]
enum Execution {
    Recorded,
    Process {
        process: PipelineProcess,
        exit_logged: bool,
    },
    Simulated(SimCounters),
    Failed(String),
}

/// An applied pipeline version.
#[derive(Debug)]
pub struct Runner {
    config: PipelineConfig,
    started: Instant,
    execution: Execution,
    /// The agent's own lines about this pipeline not shipped yet (a process's output is
    /// kept by the process).
    lines: Vec<String>,
}

impl Runner {
    /// Writes the config file and starts the pipeline; failures become a CRASHED runner.
    pub async fn start(
        mode: &RunMode,
        files: &PipelineFiles,
        id: &PipelineId,
        config: PipelineConfig,
    ) -> Runner {
        let execution = match files.write(id, &config.config_yaml).await {
            Err(e) => Execution::Failed(format!("could not write config file: {e}")),
            Ok(path) => match mode {
                RunMode::Record => Execution::Recorded,
                RunMode::Simulate(settings) => {
                    Execution::Simulated(SimCounters::new(*settings, &config.config_yaml))
                }
                RunMode::Command(template) => {
                    let level = config.log_level.as_deref();
                    match PipelineProcess::spawn(template, &path, id.as_str(), level) {
                        Ok(process) => Execution::Process {
                            process,
                            exit_logged: false,
                        },
                        Err(e) => Execution::Failed(format!("could not start command: {e}")),
                    }
                }
            },
        };
        let line = if let Execution::Failed(message) = &execution {
            tracing::error!(pipeline_id = %id, version = config.version, "{message}");
            format!("v{}: {message}", config.version)
        } else {
            tracing::info!(pipeline_id = %id, version = config.version, "pipeline started");
            let how = match &execution {
                Execution::Simulated(_) => " (simulated)",
                Execution::Recorded => " (recorded only)",
                _ => "",
            };
            format!("v{} started{how}", config.version)
        };
        Runner {
            config,
            started: Instant::now(),
            execution,
            lines: vec![line],
        }
    }

    /// Adds a line of the agent's own about this pipeline to the shipped log.
    pub fn log(&mut self, line: &str) {
        self.lines.push(line.to_owned());
    }

    /// The lines not shipped yet, oldest first: the agent's own, then the process's output.
    pub fn take_logs(&mut self) -> Vec<String> {
        let mut lines = std::mem::take(&mut self.lines);
        if let Execution::Process { process, .. } = &self.execution {
            lines.extend(process.take_unshipped());
        }
        lines
    }

    /// The config this runner was started with (a restart starts it again).
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// When the pipeline's process started, while it is alive; `None` when no process runs.
    pub fn alive_since(&self) -> Option<Instant> {
        match &self.execution {
            Execution::Process { process, .. } if process.exit().is_none() => {
                Some(process.started())
            }
            _ => None,
        }
    }

    /// How the pipeline failed, once its process ended with an error or could not start:
    /// the exit (`code 1`, or the start error) and the last line the process printed.
    pub fn failure(&self) -> Option<(String, Option<String>)> {
        match &self.execution {
            Execution::Failed(message) => Some((message.clone(), None)),
            Execution::Process { process, .. } => match process.exit() {
                Some(exit) if !exit.is_success() => {
                    Some((exit.summary(), process.recent_output().pop()))
                }
                _ => None,
            },
            Execution::Recorded | Execution::Simulated(_) => None,
        }
    }

    pub fn applied(&self) -> Applied {
        Applied {
            version: self.config.version,
            checksum: self.config.checksum.clone(),
        }
    }

    pub fn status(&self) -> PipelineStatus {
        match &self.execution {
            Execution::Recorded | Execution::Simulated(_) => PipelineStatus::Running,
            Execution::Failed(_) => PipelineStatus::Crashed,
            Execution::Process { process, .. } => match process.exit() {
                None => PipelineStatus::Running,
                Some(exit) if exit.is_success() => PipelineStatus::Stopped,
                Some(_) => PipelineStatus::Crashed,
            },
        }
    }

    pub fn view(&self) -> RunningPipeline {
        RunningPipeline {
            pipeline_id: self.config.pipeline_id.clone(),
            pipeline_name: self.config.pipeline_name.clone(),
            version: self.config.version,
            checksum: self.config.checksum.clone(),
            status: self.status(),
        }
    }

    /// Advances simulated traffic and logs a process exit once; called before each report.
    pub fn on_heartbeat(&mut self) {
        match &mut self.execution {
            Execution::Simulated(counters) => counters.tick(),
            Execution::Process {
                process,
                exit_logged,
            } if !*exit_logged => {
                if let Some(exit) = process.exit() {
                    *exit_logged = true;
                    let id = &self.config.pipeline_id;
                    tracing::warn!(pipeline_id = %id, "pipeline {}", exit.describe());
                }
            }
            _ => {}
        }
    }

    pub fn report(&self) -> PipelineReport {
        let status = self.status();
        let mut report = PipelineReport {
            pipeline_id: self.config.pipeline_id.clone(),
            version: self.config.version,
            status: status.as_str().to_string(),
            config_checksum: Some(self.config.checksum.clone()),
            ..PipelineReport::default()
        };
        match &self.execution {
            Execution::Recorded => {}
            Execution::Simulated(counters) => {
                counters.fill(&mut report);
                report.uptime_seconds = Some(seconds(self.started.elapsed()));
            }
            Execution::Failed(message) => report.recent_logs = Some(vec![message.clone()]),
            Execution::Process { process, .. } => match process.exit() {
                None => {
                    report.uptime_seconds = Some(seconds(process.uptime()));
                    report.pid = process.pid().map(i64::from);
                }
                Some(exit) => {
                    let mut logs = process.recent_output();
                    logs.push(exit.describe());
                    report.recent_logs = Some(logs);
                }
            },
        }
        report
    }

    /// Resolves once the pipeline's process has ended; at once when nothing runs.
    pub async fn wait_exit(&self) {
        if let Execution::Process { process, .. } = &self.execution {
            process.wait_exit().await;
        }
    }

    /// Stops the process (if any); the STOPPED report to send once.
    pub async fn stop(self, grace: Duration) -> PipelineReport {
        let mut report = self.report();
        if let Execution::Process { process, .. } = self.execution {
            process.stop(grace).await;
        }
        report.status = PipelineStatus::Stopped.as_str().to_string();
        report.pid = None;
        report.uptime_seconds = None;
        report
    }
}

/// Fractional seconds, as the protocol reports uptimes (`0.117464567`).
fn seconds(duration: Duration) -> vf_protocol::Number {
    vf_protocol::Number::from_f64(duration.as_secs_f64()).unwrap_or_else(|| 0.into())
}
