//! The agent: enroll (or reload identity), then `poll_once` = report + fetch + apply, and
//! `supervise` = restart or revert failed pipeline processes. The `run` loop only sleeps
//! (supervising when a process ends or a restart falls due), backs off and stops on shutdown,
//! so tests drive `poll_once` and `supervise` directly.

use std::{
    collections::BTreeMap,
    future::Future,
    time::{Duration, Instant},
};

use futures::future::{select_all, FutureExt};
use std::sync::atomic::Ordering;

use crate::update::{self, DeploymentMode};
use vf_protocol::{
    AgentHealth, ConfigResponse, EnrollRequest, Heartbeat, PipelineLogs, PipelineReport,
    PushMessage, SampleRequest, SampleResults, LOGS_PATH, SAMPLES_PATH,
};

use crate::{
    answers,
    backoff::Backoff,
    client::{ConfigPoll, ServerClient},
    error::{AgentError, Result},
    files::{PipelineFiles, PipelineId},
    identity::Identity,
    last_good::LastGoodConfigs,
    options::AgentOptions,
    push::PushFeed,
    reconcile,
    runner::RunMode,
    sim_counters::SimSettings,
    slot::{Rejection, Slot, Supervisor},
    status::RunningPipeline,
    tap::Taps,
};

/// Poll interval before the server has told us one.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(15);
/// Bounds on the server's `pollIntervalMs`, so a bad value can neither spin nor stall the agent.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(3600);
/// How long a pipeline process gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// What one `poll_once` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollOutcome {
    /// 304: the desired state is unchanged; nothing was touched.
    NotModified,
    /// 200: the served state was applied.
    Applied(ApplySummary),
}

/// Pipeline ids by what applying a config did to them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplySummary {
    pub started: Vec<String>,
    pub kept: Vec<String>,
    pub rejected: Vec<String>,
    pub stopped: Vec<String>,
}

/// One enrolled node.
#[derive(Debug)]
pub struct Agent {
    options: AgentOptions,
    identity: Identity,
    client: ServerClient,
    files: PipelineFiles,
    mode: RunMode,
    slots: BTreeMap<String, Slot>,
    last_good: LastGoodConfigs,
    /// STOPPED reports not yet delivered.
    departed: Vec<PipelineReport>,
    etag: Option<String>,
    last_config: Option<ConfigResponse>,
    /// The push stream, once a config named one (`run` only).
    push: Option<PushFeed>,
    /// The `agentHealth` (without its uptime, which changes every time and alone is no
    /// reason to send it) and `updateError` the server last acknowledged.
    health_sent: Option<(AgentHealth, Option<String>)>,
    /// When this agent started, for `agentHealth.uptimeSeconds` (fractional seconds).
    started_at: Instant,
    /// Self-update: the target tried, why it failed, and the binary to run once it worked.
    update: UpdateState,
    /// The sample requests answered lately (by id), so a request seen both on the push
    /// stream and in a config document is answered once.
    answered: std::collections::VecDeque<String>,
    /// The live taps running on this node.
    taps: Taps,
    /// The poll interval the push stream set (`poll_interval`), over the config's.
    pushed_interval: Option<Duration>,
}

/// Sample request ids remembered as answered.
const ANSWERED_KEPT: usize = 256;

impl Agent {
    /// Loads `<data_dir>/identity.json`, or enrolls and stores it.
    pub async fn start(options: AgentOptions) -> Result<Agent> {
        let mode = match &options.command {
            Some(command) => RunMode::Command(command.clone()),
            None => RunMode::Record,
        };
        Self::start_with_mode(options, mode).await
    }

    /// Like `start`, but pipelines report synthetic counters instead of running a command.
    pub async fn start_simulated(options: AgentOptions, settings: SimSettings) -> Result<Agent> {
        Self::start_with_mode(options, RunMode::Simulate(settings)).await
    }

    async fn start_with_mode(options: AgentOptions, mode: RunMode) -> Result<Agent> {
        let client = ServerClient::with_root(&options.server_url, options.extra_root.as_ref())?;
        let identity = match Identity::load(&options.data_dir).await? {
            Some(identity) => identity,
            None => enroll(&client, &options).await?,
        };
        tracing::info!(node_id = %identity.node_id, hostname = %options.hostname, "agent ready");
        let update = UpdateState::new(options.deployment_mode);
        Ok(Agent {
            files: PipelineFiles::new(&options.data_dir),
            last_good: LastGoodConfigs::load(&options.data_dir).await?,
            options,
            identity,
            client,
            mode,
            slots: BTreeMap::new(),
            departed: Vec::new(),
            etag: None,
            last_config: None,
            push: None,
            health_sent: None,
            started_at: Instant::now(),
            update,
            answered: Default::default(),
            taps: Taps::default(),
            pushed_interval: None,
        })
    }

    pub fn node_id(&self) -> &str {
        &self.identity.node_id
    }

    pub fn environment_id(&self) -> &str {
        &self.identity.environment_id
    }

    pub fn hostname(&self) -> &str {
        &self.options.hostname
    }

    /// The last 200 answer from `/api/agent/config`.
    pub fn last_config(&self) -> Option<&ConfigResponse> {
        self.last_config.as_ref()
    }

    /// Every pipeline this agent holds, by pipeline id.
    pub fn running(&self) -> Vec<RunningPipeline> {
        self.slots.values().filter_map(Slot::view).collect()
    }

    /// The override if set, else what the push stream last said (`poll_interval`), else the
    /// server's `pollIntervalMs`, else 15 s.
    pub fn poll_interval(&self) -> Duration {
        if let Some(interval) = self.options.poll_interval_override {
            return interval;
        }
        if let Some(interval) = self.pushed_interval {
            return interval;
        }
        self.last_config
            .as_ref()
            .and_then(|c| interval_of(c.poll_interval_ms))
            .unwrap_or(DEFAULT_POLL_INTERVAL)
    }

    /// Waits (up to `timeout`) for the pipeline's process to end, then returns its state.
    /// Lets tests observe a crash without sleeping; `None` on timeout or unknown pipeline.
    pub async fn wait_for_exit(
        &self,
        pipeline_id: &str,
        timeout: Duration,
    ) -> Option<RunningPipeline> {
        let slot = self.slots.get(pipeline_id)?;
        let runner = slot.runner()?;
        tokio::time::timeout(timeout, runner.wait_exit())
            .await
            .ok()?;
        slot.view()
    }

    /// Reports current state and applies the desired state in one round trip.
    pub async fn poll_once(&mut self) -> Result<PollOutcome> {
        let heartbeat = self.heartbeat();
        let answer = self
            .client
            .poll_config(&self.identity.node_token, &heartbeat, self.etag.as_deref())
            .await?;
        self.delivered(heartbeat);
        let outcome = match answer {
            ConfigPoll::NotModified => PollOutcome::NotModified,
            ConfigPoll::Changed { config, etag } => {
                let summary = self.apply(&config).await;
                for request in &config.sample_requests {
                    self.answer_sample(request);
                }
                self.etag = etag;
                self.last_config = Some(*config);
                PollOutcome::Applied(summary)
            }
        };
        self.consider_update().await;
        self.ship_logs();
        Ok(outcome)
    }

    /// Acts on the config's `pendingAction` ([`crate::update`]): once per target version.
    /// A simulated node has no binary: it takes the new version as its own at once, so
    /// agent releases can be rehearsed on a simulated fleet.
    async fn consider_update(&mut self) {
        let action = self
            .last_config
            .as_ref()
            .and_then(|c| c.pending_action.clone());
        let Some(action) = action else {
            self.update.error = None;
            return;
        };
        if action.target_version == self.options.agent_version
            || self.update.attempted.as_deref() == Some(action.target_version.as_str())
        {
            return;
        }
        self.update.attempted = Some(action.target_version.clone());
        if matches!(self.mode, RunMode::Simulate(_)) {
            tracing::info!(target_version = %action.target_version, "simulated self-update");
            self.options.agent_version = action.target_version.clone();
            self.update.error = None;
            return;
        }
        match self.update.perform(&action, &self.options).await {
            Ok(exe) => {
                tracing::info!(target_version = %action.target_version, exe = %exe.display(),
                    "self-update installed; restarting");
                self.update.installed = Some(exe);
            }
            Err(error) => {
                tracing::warn!(target_version = %action.target_version, "self-update refused: {error}");
                self.update.error = Some(error);
            }
        }
    }

    /// Sends the pipelines' new log lines (`/api/agent/logs`) in the background. Lines that
    /// fail to go are dropped: the log is a convenience, never worth holding up a poll.
    pub fn ship_logs(&mut self) {
        let batches: Vec<PipelineLogs> = self
            .slots
            .iter_mut()
            .map(|(id, slot)| PipelineLogs {
                pipeline_id: id.clone(),
                lines: slot.take_logs(),
            })
            .filter(|b| !b.lines.is_empty())
            .collect();
        if !batches.is_empty() {
            self.send_in_background(LOGS_PATH, batches);
        }
    }

    /// POSTs `body` to `path` without waiting; a failure is logged.
    fn send_in_background<T>(&self, path: &'static str, body: T)
    where
        T: serde::Serialize + Send + Sync + 'static,
    {
        let client = self.client.clone();
        let token = self.identity.node_token.clone();
        let node_id = self.identity.node_id.clone();
        tokio::spawn(async move {
            if let Err(e) = client.post(path, &token, &body).await {
                tracing::warn!(%node_id, "sending to {path} failed: {e}");
            }
        });
    }

    /// Answers a sample request once (`/api/agent/samples`): generated events when
    /// simulated, else why there are none.
    fn answer_sample(&mut self, request: &SampleRequest) {
        if self.answered.contains(&request.request_id) {
            return;
        }
        if self.answered.len() == ANSWERED_KEPT {
            self.answered.pop_front();
        }
        self.answered.push_back(request.request_id.clone());
        let simulated = matches!(self.mode, RunMode::Simulate(_));
        let results = answers::sample_answers(
            request,
            simulated,
            &self.options.hostname,
            answers::now_ms(),
        );
        tracing::info!(node_id = %self.node_id(), pipeline_id = %request.pipeline_id, components = request.component_keys.len(), "answering a sample request");
        self.send_in_background(SAMPLES_PATH, SampleResults { results });
    }

    /// Acts on a push message other than `config_changed`.
    async fn on_push(&mut self, message: PushMessage) {
        match message {
            PushMessage::ConfigChanged { .. } => {}
            PushMessage::PollInterval { interval_ms } => {
                self.pushed_interval = interval_of(interval_ms);
            }
            PushMessage::SampleRequest {
                request_id,
                pipeline_id,
                component_keys,
                limit,
            } => self.answer_sample(&SampleRequest {
                request_id,
                pipeline_id,
                component_keys,
                limit,
            }),
            PushMessage::TapStart {
                request_id,
                pipeline_id,
                component_id,
            } => {
                let simulated = matches!(self.mode, RunMode::Simulate(_));
                let target = crate::tap::Target {
                    client: self.client.clone(),
                    token: self.identity.node_token.clone(),
                    hostname: self.options.hostname.clone(),
                };
                self.taps
                    .start(target, request_id, pipeline_id, component_id, simulated);
            }
            PushMessage::TapStop { request_id } => self.taps.stop(&request_id),
            PushMessage::Action {
                action,
                pipeline_id,
            } => match (action.as_str(), pipeline_id) {
                ("restart", Some(pipeline_id)) => self.restart(&pipeline_id).await,
                (other, _) => {
                    tracing::warn!(node_id = %self.node_id(), action = %other, "push: unknown action or no pipeline; ignored");
                }
            },
        }
    }

    /// Restarts one pipeline's process (an operator's `restart` action).
    async fn restart(&mut self, pipeline_id: &str) {
        let (Some(slot), Ok(id)) = (
            self.slots.get_mut(pipeline_id),
            PipelineId::parse(pipeline_id),
        ) else {
            tracing::warn!(%pipeline_id, "restart asked for a pipeline this node does not run");
            return;
        };
        if slot.restart(&self.mode, &self.files, &id, STOP_GRACE).await {
            tracing::info!(%pipeline_id, "pipeline restarted by an operator");
            self.ship_logs();
        }
    }

    /// Reports through `POST /api/agent/heartbeat` without polling for config.
    pub async fn send_heartbeat(&mut self) -> Result<()> {
        let heartbeat = self.heartbeat();
        self.client
            .heartbeat(&self.identity.node_token, &heartbeat)
            .await?;
        self.delivered(heartbeat);
        Ok(())
    }

    /// What the server acknowledged is not sent again: the STOPPED reports of departed
    /// pipelines, and the health and update error (without the uptime, which always changes).
    fn delivered(&mut self, heartbeat: Heartbeat) {
        self.departed.clear();
        if let Some(health) = heartbeat.agent_health {
            self.health_sent = Some((without_uptime(health), heartbeat.update_error));
        }
    }

    /// Stops every pipeline process (files stay, so a restart can be inspected).
    pub async fn stop_all(&mut self) {
        for (_, slot) in std::mem::take(&mut self.slots) {
            if let Some(runner) = slot.into_runner() {
                runner.stop(STOP_GRACE).await;
            }
        }
    }

    /// One supervision step at `now` (only when running a command): restarts a failed pipeline
    /// process once its restart is due, records a version whose process stayed up long enough
    /// as the pipeline's last good config, and after repeated failures of a new version goes
    /// back to that config (or, with none, leaves the pipeline CRASHED). `run` calls it
    /// whenever a process ends or something falls due.
    pub async fn supervise(&mut self, now: Instant) {
        if !matches!(self.mode, RunMode::Command(_)) {
            return;
        }
        let mut supervisor = Supervisor {
            mode: &self.mode,
            files: &self.files,
            policy: &self.options.crash_policy,
            last_good: &mut self.last_good,
            stop_grace: STOP_GRACE,
        };
        for (id, slot) in &mut self.slots {
            if let Ok(id) = PipelineId::parse(id) {
                slot.supervise(&id, &mut supervisor, now).await;
            }
        }
    }

    /// When `supervise` next has work that no process exit will announce.
    fn next_supervision(&self) -> Option<Instant> {
        if !matches!(self.mode, RunMode::Command(_)) {
            return None;
        }
        let policy = &self.options.crash_policy;
        self.slots
            .values()
            .filter_map(|slot| slot.next_due(policy, &self.last_good))
            .min()
    }

    /// Resolves when any live pipeline process ends; never when none is alive.
    async fn any_exit(&self) {
        let exits: Vec<_> = self
            .slots
            .values()
            .filter_map(Slot::alive_runner)
            .map(|runner| runner.wait_exit().boxed())
            .collect();
        if exits.is_empty() {
            std::future::pending::<()>().await;
        } else {
            select_all(exits).await;
        }
    }

    /// Sleeps until `until`, supervising pipelines whenever a process ends or a restart or
    /// health check falls due, and ends early when the push stream says the config changed.
    /// Returns false when `shutdown` resolved.
    async fn supervise_until(
        &mut self,
        until: Instant,
        mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> bool {
        // Out of `self` while waiting, so the wait can also borrow `self`.
        let mut push = self.push.take();
        let awake = loop {
            let now = Instant::now();
            self.supervise(now).await;
            if now >= until {
                break true;
            }
            let wake = self.next_supervision().map_or(until, |due| due.min(until));
            tokio::select! {
                () = &mut shutdown => break false,
                () = tokio::time::sleep_until(wake.into()) => {}
                () = self.any_exit() => {}
                message = next_push(&mut push) => match message {
                    Some(PushMessage::ConfigChanged { pipeline_id, reason }) => {
                        tracing::debug!(node_id = %self.node_id(), %pipeline_id, %reason, "push: config changed; polling now");
                        break true;
                    }
                    Some(other) => self.on_push(other).await,
                    // The feed's task ended: poll on the interval alone until a config names it again.
                    None => push = None,
                },
            }
        };
        self.push = push;
        awake
    }

    /// Opens the push stream the last config named, when pushing is on and none is open.
    fn open_push(&mut self) {
        if !self.options.push || self.push.is_some() {
            return;
        }
        if let Some(url) = self.last_config.as_ref().and_then(|c| c.push_url.clone()) {
            self.push = Some(PushFeed::spawn(url, self.identity.node_token.clone()));
        }
    }

    /// Polls until `shutdown` resolves ([`Exit::Shutdown`]) or a self-update installed a new
    /// binary ([`Exit::Restart`]), then stops all pipelines. Errors never end the loop: a
    /// revoked token retries slowly, 429/503 honour `Retry-After`, the rest back off.
    /// Between polls it supervises the pipeline processes (`supervise`).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Exit {
        tokio::pin!(shutdown);
        let mut backoff = Backoff::default();
        loop {
            let result = tokio::select! {
                () = &mut shutdown => break,
                result = self.poll_once() => result,
            };
            if self.update.installed.is_some() {
                break;
            }
            let delay = match result {
                Ok(_) => {
                    backoff.reset();
                    self.open_push();
                    self.poll_interval()
                }
                Err(error) => {
                    let delay = backoff.next_delay(&error);
                    if matches!(error, AgentError::Unauthorized) {
                        tracing::error!(node_id = %self.node_id(), retry_in = ?delay, "{error}");
                    } else {
                        tracing::warn!(node_id = %self.node_id(), retry_in = ?delay, "poll failed: {error}");
                    }
                    delay
                }
            };
            if !self
                .supervise_until(Instant::now() + delay, shutdown.as_mut())
                .await
            {
                break;
            }
        }
        self.push = None;
        self.taps = Taps::default();
        tracing::info!(node_id = %self.node_id(), "shutting down; stopping pipelines");
        self.stop_all().await;
        match self.update.installed.take() {
            Some(exe) => Exit::Restart(exe),
            None => Exit::Shutdown,
        }
    }

    fn heartbeat(&mut self) -> Heartbeat {
        let mut pipelines = self.departed.clone();
        for slot in self.slots.values_mut() {
            slot.on_heartbeat();
            pipelines.extend(slot.report());
        }
        let running = pipelines.iter().filter(|p| p.status == "RUNNING").count() as i64;
        let health = AgentHealth {
            push_connected: self
                .push
                .as_ref()
                .map(|p| p.health.connected.load(Ordering::Relaxed)),
            push_reconnects_total: self
                .push
                .as_ref()
                .map(|p| p.health.reconnects.load(Ordering::Relaxed).into()),
            pipelines_running: Some(running),
            ..AgentHealth::default()
        };
        // Sent when it (or the update error) changed: a heartbeat carrying it is written
        // before it is answered. The deployment mode and update error travel with it.
        let report = (health, self.update.error.clone());
        let changed = self.health_sent.as_ref() != Some(&report);
        let (health, update_error) = report;
        let agent_health = changed.then(|| AgentHealth {
            uptime_seconds: vf_protocol::Number::from_f64(self.started_at.elapsed().as_secs_f64()),
            ..health
        });
        Heartbeat {
            pipelines,
            agent_version: Some(self.options.agent_version.clone()),
            vector_version: None,
            labels: (!self.options.labels.is_empty()).then(|| self.options.labels.clone()),
            host_metrics: None,
            deployment_mode: changed.then(|| self.update.mode.as_str().to_string()),
            update_error: changed.then_some(update_error).flatten(),
            agent_health,
            ..Heartbeat::default()
        }
    }

    async fn apply(&mut self, config: &ConfigResponse) -> ApplySummary {
        let current = self
            .slots
            .iter()
            .map(|(id, slot)| (id.clone(), slot.current()))
            .collect();
        let plan = reconcile::plan(&current, &config.pipelines);
        let mut summary = ApplySummary::default();
        for id in plan.stop {
            self.stop_pipeline(&id).await;
            summary.stopped.push(id);
        }
        for (id, served) in plan.start {
            let slot = self.slots.entry(served.pipeline_id.clone()).or_default();
            slot.start(&self.mode, &self.files, &id, served, STOP_GRACE)
                .await;
            summary.started.push(id.to_string());
        }
        for id in plan.keep {
            if let Some(slot) = self.slots.get_mut(&id) {
                slot.keep();
            }
            summary.kept.push(id);
        }
        for id in plan.hold {
            if let Some(slot) = self.slots.get_mut(&id) {
                slot.hold();
            }
            summary.kept.push(id);
        }
        for (served, message) in plan.reject {
            tracing::error!(pipeline_id = %served.pipeline_id, version = served.version, "{message}");
            summary.rejected.push(served.pipeline_id.clone());
            let slot = self.slots.entry(served.pipeline_id.clone()).or_default();
            slot.reject(Rejection {
                config: served,
                message,
            });
        }
        self.remove_stale_files().await;
        summary
    }

    async fn stop_pipeline(&mut self, id: &str) {
        let Some(slot) = self.slots.remove(id) else {
            return;
        };
        if let Some(runner) = slot.into_runner() {
            self.departed.push(runner.stop(STOP_GRACE).await);
        }
        if let Ok(id) = PipelineId::parse(id) {
            if let Err(e) = self.files.remove(&id).await {
                tracing::warn!(pipeline_id = %id, "could not remove config file: {e}");
            }
        }
        tracing::info!(pipeline_id = %id, "pipeline stopped: no longer served");
    }

    /// Drops config files of pipelines this agent no longer holds (e.g. from before a restart),
    /// and the last good configs of pipelines no longer served.
    async fn remove_stale_files(&mut self) {
        let held: Vec<PipelineId> = self
            .slots
            .iter()
            .filter(|(_, slot)| slot.runner().is_some())
            .filter_map(|(id, _)| PipelineId::parse(id).ok())
            .collect();
        let keep: Vec<&PipelineId> = held.iter().collect();
        if let Err(e) = self.files.remove_others(&keep).await {
            tracing::warn!("could not clean the pipelines folder: {e}");
        }
        let served: Vec<PipelineId> = self
            .slots
            .keys()
            .filter_map(|id| PipelineId::parse(id).ok())
            .collect();
        let keep: Vec<&PipelineId> = served.iter().collect();
        if let Err(e) = self.last_good.retain(&keep).await {
            tracing::warn!("could not clean the last good configs: {e}");
        }
    }
}

async fn enroll(client: &ServerClient, options: &AgentOptions) -> Result<Identity> {
    if options.enrollment_token.is_empty() {
        return Err(AgentError::MissingEnrollmentToken(options.data_dir.clone()));
    }
    let request = EnrollRequest {
        token: options.enrollment_token.clone(),
        hostname: options.hostname.clone(),
        os: Some(std::env::consts::OS.to_string()),
        agent_version: Some(options.agent_version.clone()),
        vector_version: None,
        labels: (!options.labels.is_empty()).then(|| options.labels.clone()),
    };
    let response = client.enroll(&request).await?;
    let identity = Identity {
        node_id: response.node_id,
        node_token: response.node_token,
        environment_id: response.environment_id,
    };
    identity.save(&options.data_dir).await?;
    tracing::info!(
        node_id = %identity.node_id,
        environment = %response.environment_name,
        "enrolled"
    );
    Ok(identity)
}

/// A poll interval the server gave, within bounds; `None` when it is no interval.
fn interval_of(ms: i64) -> Option<Duration> {
    let ms = u64::try_from(ms).ok().filter(|ms| *ms > 0)?;
    Some(Duration::from_millis(ms).clamp(MIN_POLL_INTERVAL, MAX_POLL_INTERVAL))
}

/// The next push message; never, when there is no feed.
async fn next_push(push: &mut Option<PushFeed>) -> Option<PushMessage> {
    match push {
        Some(feed) => feed.messages.recv().await,
        None => std::future::pending().await,
    }
}

/// `health` as compared with the next one: its uptime always changes.
fn without_uptime(health: AgentHealth) -> AgentHealth {
    AgentHealth {
        uptime_seconds: None,
        ..health
    }
}

/// Why [`Agent::run`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop.
    Shutdown,
    /// A self-update replaced the binary at this path: run it with the same arguments.
    Restart(std::path::PathBuf),
}

/// Self-update state of one agent.
#[derive(Debug)]
struct UpdateState {
    mode: DeploymentMode,
    /// The target version last tried: each is tried once per process.
    attempted: Option<String>,
    /// Why the last try failed, reported as `updateError` while the server still asks.
    error: Option<String>,
    /// The executable replaced by a successful update, to run next.
    installed: Option<std::path::PathBuf>,
}

impl UpdateState {
    fn new(mode: Option<DeploymentMode>) -> UpdateState {
        UpdateState {
            mode: mode.unwrap_or_else(DeploymentMode::detect),
            attempted: None,
            error: None,
            installed: None,
        }
    }

    /// Checks, downloads, verifies and installs; returns the replaced executable.
    async fn perform(
        &self,
        action: &vf_protocol::PendingAction,
        options: &AgentOptions,
    ) -> std::result::Result<std::path::PathBuf, String> {
        let request = update::check(action, self.mode)?;
        let exe = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(|e| format!("finding the agent's executable: {e}"))?;
        let http = update::client(options.extra_root.as_ref())?;
        let verified = update::download(&http, &request, options.update_key.as_ref(), &exe).await?;
        update::install(&verified, &exe)?;
        Ok(exe)
    }
}
