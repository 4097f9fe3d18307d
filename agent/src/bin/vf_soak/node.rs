//! One simulated node: enrolls, then polls `POST /api/agent/config` with a heartbeat body
//! every interval, the way vf-agent does, and records every answer it gets.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use vf_agent::{AgentError, ConfigPoll, ServerClient};
use vf_protocol::{ConfigResponse, EnrollRequest, Heartbeat, PipelineReport};

/// What an answer meant for the soak pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The pipeline is missing from `pipelines`: an agent would stop it.
    Absent,
    Version(i64),
}

/// One answer to one poll.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Wall clock (ms since the epoch) when the answer arrived; the server's release
    /// timestamps use the same clock (same machine).
    pub at_ms: i64,
    pub latency_us: u64,
    /// The HTTP status; 0 when no answer came (connection error, timeout).
    pub status: u16,
    /// For 200 what was served, for 304 what the node kept; `None` otherwise.
    pub served: Option<Served>,
}

/// Everything one node saw.
#[derive(Debug, Clone)]
pub struct NodeRun {
    pub node_id: String,
    pub answers: Vec<Answer>,
}

/// An enrolled node.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub token: String,
    pub environment_id: String,
    pub labels: BTreeMap<String, String>,
}

/// What every node of the fleet shares.
pub struct Fleet {
    /// vf-agent's own client of the agent routes, shared by every node.
    pub client: ServerClient,
    pub pipeline_id: String,
    pub interval: Duration,
    pub deadline: Instant,
    pub events_per_sec: u64,
    pub error_percent: f64,
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `POST /api/agent/enroll`, retried (honouring `Retry-After`) while the server is overloaded.
pub async fn enroll(
    client: &ServerClient,
    token: &str,
    hostname: String,
    labels: BTreeMap<String, String>,
) -> Result<Node> {
    let request = EnrollRequest {
        token: token.to_string(),
        hostname,
        os: Some("linux".into()),
        agent_version: Some(concat!("vf-soak/", env!("CARGO_PKG_VERSION")).into()),
        vector_version: None,
        labels: Some(labels.clone()),
    };
    for _ in 0..10 {
        match client.enroll(&request).await {
            Ok(enrolled) => {
                return Ok(Node {
                    id: enrolled.node_id,
                    token: enrolled.node_token,
                    environment_id: enrolled.environment_id,
                    labels,
                })
            }
            Err(AgentError::Overloaded { retry_after, .. }) => {
                tokio::time::sleep(retry_after.unwrap_or(Duration::from_secs(1))).await
            }
            Err(e) => bail!("enroll: {e}"),
        }
    }
    bail!("enroll: still overloaded after 10 tries")
}

/// Polls until the fleet's deadline; the first poll waits a random part of one interval so
/// the fleet does not arrive as one wave.
pub async fn run(fleet: Arc<Fleet>, node: Node) -> NodeRun {
    let mut answers = Vec::new();
    let mut etag: Option<String> = None;
    let mut kept: Option<Served> = None;
    // The simulated process restarts (counters from zero) whenever its version changes.
    let mut process_started = Instant::now();
    sleep_until(&fleet, fleet.interval.mul_f64(rand::random::<f64>())).await;
    while Instant::now() < fleet.deadline {
        let heartbeat = heartbeat(&fleet, &node, kept, process_started);
        let started = Instant::now();
        let outcome = poll(&fleet, &node.token, &heartbeat, etag.as_deref()).await;
        let latency_us = started.elapsed().as_micros() as u64;
        let (status, served, wait) = match outcome {
            Ok(Poll::Changed { config, new_etag }) => {
                let served = config
                    .pipelines
                    .iter()
                    .find(|p| p.pipeline_id == fleet.pipeline_id)
                    .map_or(Served::Absent, |p| Served::Version(p.version));
                if kept != Some(served) {
                    process_started = Instant::now();
                }
                kept = Some(served);
                etag = new_etag;
                (200, Some(served), fleet.interval)
            }
            Ok(Poll::NotModified) => (304, kept, fleet.interval),
            Ok(Poll::Refused {
                status,
                retry_after,
            }) => (status, None, retry_after.unwrap_or(fleet.interval)),
            Err(_) => (0, None, fleet.interval),
        };
        answers.push(Answer {
            at_ms: now_ms(),
            latency_us,
            status,
            served,
        });
        sleep_until(&fleet, wait).await;
    }
    NodeRun {
        node_id: node.id,
        answers,
    }
}

async fn sleep_until(fleet: &Fleet, wait: Duration) {
    let wake = (Instant::now() + wait).min(fleet.deadline);
    tokio::time::sleep_until(wake.into()).await;
}

fn heartbeat(fleet: &Fleet, node: &Node, kept: Option<Served>, since: Instant) -> Heartbeat {
    let pipelines = match kept {
        Some(Served::Version(version)) => {
            let events_in = (since.elapsed().as_secs_f64() * fleet.events_per_sec as f64) as i64;
            let errors = (events_in as f64 * fleet.error_percent / 100.0) as i64;
            vec![PipelineReport {
                pipeline_id: fleet.pipeline_id.clone(),
                version,
                status: "RUNNING".into(),
                events_in: Some(events_in.into()),
                events_out: Some((events_in - errors).into()),
                errors_total: Some(errors.into()),
                uptime_seconds: vf_protocol::Number::from_f64(since.elapsed().as_secs_f64()),
                ..PipelineReport::default()
            }]
        }
        _ => Vec::new(),
    };
    Heartbeat {
        pipelines,
        agent_version: Some(concat!("vf-soak/", env!("CARGO_PKG_VERSION")).into()),
        vector_version: None,
        labels: Some(node.labels.clone()),
        host_metrics: None,
        ..Heartbeat::default()
    }
}

enum Poll {
    Changed {
        config: Box<ConfigResponse>,
        new_etag: Option<String>,
    },
    NotModified,
    Refused {
        status: u16,
        retry_after: Option<Duration>,
    },
}

async fn poll(
    fleet: &Fleet,
    token: &str,
    heartbeat: &Heartbeat,
    etag: Option<&str>,
) -> Result<Poll> {
    let refused = |status: u16, retry_after| {
        Ok(Poll::Refused {
            status,
            retry_after,
        })
    };
    match fleet.client.poll_config(token, heartbeat, etag).await {
        Ok(ConfigPoll::Changed { config, etag }) => Ok(Poll::Changed {
            config,
            new_etag: etag,
        }),
        Ok(ConfigPoll::NotModified) => Ok(Poll::NotModified),
        Err(AgentError::Overloaded {
            status,
            retry_after,
        }) => refused(status, retry_after),
        Err(AgentError::Unauthorized) => refused(401, None),
        Err(AgentError::Status { status, .. }) => refused(status, None),
        Err(e) => Err(e.into()),
    }
}
