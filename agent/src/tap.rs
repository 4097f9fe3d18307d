//! Live taps: after `tap_start`, the agent sends one component's events to
//! `/api/agent/tap-events` about once a second until `tap_stop` (or [`MAX_TAP`]), then the
//! tap's end (`status`, `reason`). A simulated node taps generated events; a node running a
//! command answers at once that it cannot tap its process.

use std::collections::HashMap;
use std::time::Duration;

use vf_protocol::{TapEvents, TAP_EVENTS_PATH};

use crate::answers::{self, CANNOT_SAMPLE};
use crate::client::ServerClient;

/// How often a running tap sends what it saw.
const EVERY: Duration = Duration::from_secs(1);
/// Events a simulated tap sends each time.
const EVENTS_PER_SEND: i64 = 3;
/// A tap nobody stops ends by itself after this long.
pub const MAX_TAP: Duration = Duration::from_secs(600);

/// Where a tap sends its events.
#[derive(Debug, Clone)]
pub struct Target {
    pub client: ServerClient,
    pub token: String,
    pub hostname: String,
}

/// The running taps, by request id. Dropping it ends them (without a last message).
#[derive(Debug, Default)]
pub struct Taps {
    running: HashMap<String, Running>,
}

#[derive(Debug)]
struct Running {
    task: tokio::task::JoinHandle<()>,
    target: Target,
    pipeline_id: String,
    component_id: String,
}

impl Drop for Taps {
    fn drop(&mut self) {
        for tap in self.running.values() {
            tap.task.abort();
        }
    }
}

impl Taps {
    /// Starts tap `request_id` (a repeated start of a running tap is ignored).
    pub fn start(
        &mut self,
        target: Target,
        request_id: String,
        pipeline_id: String,
        component_id: String,
        simulated: bool,
    ) {
        self.running.retain(|_, tap| !tap.task.is_finished());
        if self.running.contains_key(&request_id) {
            return;
        }
        tracing::info!(%pipeline_id, %component_id, "tap started");
        let base = TapEvents {
            request_id: request_id.clone(),
            pipeline_id: pipeline_id.clone(),
            component_id: component_id.clone(),
            ..TapEvents::default()
        };
        let task = tokio::spawn(run(target.clone(), base, simulated));
        self.running.insert(
            request_id,
            Running {
                task,
                target,
                pipeline_id,
                component_id,
            },
        );
    }

    /// Stops tap `request_id` and tells the server it ended.
    pub fn stop(&mut self, request_id: &str) {
        let Some(tap) = self.running.remove(request_id) else {
            return;
        };
        tap.task.abort();
        tracing::info!(pipeline_id = %tap.pipeline_id, component_id = %tap.component_id, "tap stopped");
        let end = TapEvents {
            request_id: request_id.to_owned(),
            pipeline_id: tap.pipeline_id,
            component_id: tap.component_id,
            status: Some("stopped".into()),
            reason: Some("stopped by the operator".into()),
            events: None,
        };
        tokio::spawn(async move { send(&tap.target, &end).await });
    }
}

async fn send(target: &Target, body: &TapEvents) -> bool {
    match target
        .client
        .post(TAP_EVENTS_PATH, &target.token, body)
        .await
    {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("tap: sending events failed: {e}");
            false
        }
    }
}

async fn run(target: Target, base: TapEvents, simulated: bool) {
    if !simulated {
        let end = TapEvents {
            status: Some("error".into()),
            reason: Some(CANNOT_SAMPLE.into()),
            ..base
        };
        send(&target, &end).await;
        return;
    }
    let started = tokio::time::Instant::now();
    let mut seq = 0u64;
    while started.elapsed() < MAX_TAP {
        tokio::time::sleep(EVERY).await;
        let events = answers::simulated_events(
            &target.hostname,
            &base.component_id,
            EVENTS_PER_SEND,
            seq,
            answers::now_ms(),
        );
        seq += EVENTS_PER_SEND as u64;
        let body = TapEvents {
            events: Some(events),
            ..base.clone()
        };
        send(&target, &body).await;
    }
    let end = TapEvents {
        status: Some("stopped".into()),
        reason: Some(format!("the tap ran {} minutes", MAX_TAP.as_secs() / 60)),
        ..base
    };
    send(&target, &end).await;
}
