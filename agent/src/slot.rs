//! One pipeline as the agent holds it: what runs, a served config it refused, a version it
//! gave up on; and the supervision step that restarts a failed process, records a healthy
//! version as the last good config, or goes back to it (the rule itself is `crash`).

use std::time::{Duration, Instant};

use vf_protocol::{FailedVersion, PipelineConfig, PipelineReport};

use crate::{
    crash::{CrashPolicy, Crashes, Failure, LastGood, Verdict},
    files::{PipelineFiles, PipelineId},
    last_good::LastGoodConfigs,
    reconcile::{Applied, Current},
    runner::{RunMode, Runner},
    status::{PipelineStatus, RunningPipeline},
};

/// A served config that was refused; the previously applied version (if any) keeps running.
#[derive(Debug)]
pub struct Rejection {
    pub config: PipelineConfig,
    pub message: String,
}

/// A served version the agent stopped retrying after it crashed repeatedly.
#[derive(Debug)]
struct Failed {
    version: Applied,
    reason: String,
}

/// What supervising a pipeline needs from the agent.
#[derive(Debug)]
pub struct Supervisor<'a> {
    pub mode: &'a RunMode,
    pub files: &'a PipelineFiles,
    pub policy: &'a CrashPolicy,
    pub last_good: &'a mut LastGoodConfigs,
    /// How long a process gets to exit after SIGTERM.
    pub stop_grace: Duration,
}

/// One pipeline id this agent holds.
#[derive(Debug, Default)]
pub struct Slot {
    runner: Option<Runner>,
    rejection: Option<Rejection>,
    failed: Option<Failed>,
    /// Failed exits of the runner's version.
    crashes: Crashes,
    /// When the runner, whose process failed, starts again.
    restart_at: Option<Instant>,
}

impl Slot {
    /// What `reconcile::plan` compares with the served config.
    pub fn current(&self) -> Current {
        Current {
            applied: self.runner.as_ref().map(Runner::applied),
            failed: self.failed.as_ref().map(|f| f.version.clone()),
        }
    }

    pub fn runner(&self) -> Option<&Runner> {
        self.runner.as_ref()
    }

    /// The runner, for stopping it; the slot is dropped with it.
    pub fn into_runner(self) -> Option<Runner> {
        self.runner
    }

    /// A served version to run instead of whatever ran: a fresh start, failures forgotten.
    pub async fn start(
        &mut self,
        mode: &RunMode,
        files: &PipelineFiles,
        id: &PipelineId,
        config: PipelineConfig,
        grace: Duration,
    ) {
        self.rejection = None;
        self.failed = None;
        self.crashes = Crashes::default();
        self.replace(mode, files, id, config, grace).await;
    }

    /// Served as running: any refused or failed version is history.
    pub fn keep(&mut self) {
        self.rejection = None;
        self.failed = None;
    }

    /// Served as the version that failed: keep what runs and the failure.
    pub fn hold(&mut self) {
        self.rejection = None;
    }

    pub fn reject(&mut self, rejection: Rejection) {
        self.rejection = Some(rejection);
    }

    /// Lets the runner advance counters and log an exit before the report is taken.
    pub fn on_heartbeat(&mut self) {
        if let Some(runner) = &mut self.runner {
            runner.on_heartbeat();
        }
    }

    pub fn report(&self) -> Option<PipelineReport> {
        let mut report = match &self.rejection {
            Some(rejection) => PipelineReport {
                pipeline_id: rejection.config.pipeline_id.clone(),
                version: rejection.config.version,
                status: PipelineStatus::Crashed.as_str().to_string(),
                config_checksum: Some(rejection.config.checksum.clone()),
                recent_logs: Some(vec![rejection.message.clone()]),
                ..PipelineReport::default()
            },
            None => self.runner.as_ref()?.report(),
        };
        report.failed_version = self.failed.as_ref().map(|failed| FailedVersion {
            version: failed.version.version,
            status: PipelineStatus::Crashed.as_str().to_string(),
            reason: failed.reason.clone(),
        });
        Some(report)
    }

    pub fn view(&self) -> Option<RunningPipeline> {
        if let Some(Rejection { config, .. }) = &self.rejection {
            return Some(RunningPipeline {
                pipeline_id: config.pipeline_id.clone(),
                pipeline_name: config.pipeline_name.clone(),
                version: config.version,
                checksum: config.checksum.clone(),
                status: PipelineStatus::Crashed,
            });
        }
        self.runner.as_ref().map(Runner::view)
    }

    /// The runner whose process is alive, to wake the agent when it ends.
    pub fn alive_runner(&self) -> Option<&Runner> {
        self.runner.as_ref().filter(|r| r.alive_since().is_some())
    }

    /// When `supervise` next has something to do without a process ending first: a restart
    /// falling due, or a new version's process having been up long enough to prove it.
    pub fn next_due(&self, policy: &CrashPolicy, last_good: &LastGoodConfigs) -> Option<Instant> {
        let runner = self.runner.as_ref()?;
        match runner.alive_since() {
            Some(since) if last_good.standing(runner.config()) != LastGood::ThisVersion => {
                Some(since + policy.healthy_after)
            }
            Some(_) => None,
            None => self.restart_at,
        }
    }

    /// One supervision step at `now`: a process up long enough makes its version the last good
    /// config; a failed exit is counted once and leads to a restart (when due), a revert to the
    /// last good config, or giving up.
    pub async fn supervise(&mut self, id: &PipelineId, sup: &mut Supervisor<'_>, now: Instant) {
        let Some(runner) = &self.runner else { return };
        if let Some(since) = runner.alive_since() {
            let proven = sup.policy.is_healthy(now.saturating_duration_since(since));
            if proven && sup.last_good.standing(runner.config()) != LastGood::ThisVersion {
                keep_as_last_good(id, runner.config(), sup.last_good).await;
            }
            return;
        }
        let Some((exit, last_line)) = runner.failure() else {
            return;
        };
        let given_up = self
            .failed
            .as_ref()
            .is_some_and(|f| f.version == runner.applied());
        if given_up {
            return;
        }
        if let Some(at) = self.restart_at {
            if now >= at {
                let config = runner.config().clone();
                tracing::info!(pipeline_id = %id, version = config.version, "restarting failed pipeline");
                self.replace(sup.mode, sup.files, id, config, sup.stop_grace)
                    .await;
            }
            return;
        }
        let failure = Failure {
            at: now,
            exit: &exit,
            last_line: last_line.as_deref(),
        };
        let standing = sup.last_good.standing(runner.config());
        let failed = runner.applied();
        match self.crashes.record(sup.policy, failure, standing) {
            Verdict::Restart { at } => self.restart_at = Some(at),
            Verdict::Revert { reason } => {
                let Some(good) = sup.last_good.get(id.as_str()).cloned() else {
                    return;
                };
                tracing::error!(pipeline_id = %id, version = failed.version, good_version = good.version, "{reason}; going back to the last good config");
                self.failed = Some(Failed {
                    version: failed,
                    reason,
                });
                self.crashes = Crashes::default();
                self.replace(sup.mode, sup.files, id, good, sup.stop_grace)
                    .await;
            }
            Verdict::GiveUp { reason } => {
                tracing::error!(pipeline_id = %id, version = failed.version, "{reason}; no good config to go back to, pipeline stays stopped");
                self.failed = Some(Failed {
                    version: failed,
                    reason,
                });
            }
        }
    }

    /// An operator's restart: stops what runs and starts the same version again, its failures
    /// forgotten. False when nothing runs here.
    pub async fn restart(
        &mut self,
        mode: &RunMode,
        files: &PipelineFiles,
        id: &PipelineId,
        grace: Duration,
    ) -> bool {
        let Some(config) = self.runner.as_ref().map(|r| r.config().clone()) else {
            return false;
        };
        self.failed = None;
        self.crashes = Crashes::default();
        self.replace(mode, files, id, config, grace).await;
        if let Some(runner) = &mut self.runner {
            runner.log("restarted by an operator");
        }
        true
    }

    /// Log lines not shipped yet.
    pub fn take_logs(&mut self) -> Vec<String> {
        self.runner
            .as_mut()
            .map(Runner::take_logs)
            .unwrap_or_default()
    }

    /// Stops what runs and starts `config`.
    async fn replace(
        &mut self,
        mode: &RunMode,
        files: &PipelineFiles,
        id: &PipelineId,
        config: PipelineConfig,
        grace: Duration,
    ) {
        if let Some(old) = self.runner.take() {
            old.stop(grace).await;
        }
        self.restart_at = None;
        self.runner = Some(Runner::start(mode, files, id, config).await);
    }
}

async fn keep_as_last_good(id: &PipelineId, config: &PipelineConfig, store: &mut LastGoodConfigs) {
    match store.save(id, config).await {
        Ok(()) => {
            tracing::info!(pipeline_id = %id, version = config.version, "version is healthy; kept as the last good config");
        }
        Err(e) => tracing::warn!(pipeline_id = %id, "could not store the last good config: {e}"),
    }
}
