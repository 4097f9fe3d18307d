//! One simulated node: enrolls, then polls `POST /api/agent/config` with a heartbeat body
//! every interval, the way vf-agent does, and records every answer it gets.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use reqwest::{header, StatusCode};
use vf_agent::protocol::{
    ConfigResponse, EnrollRequest, EnrollResponse, Heartbeat, PipelineReport,
};

/// Longest `Retry-After` honoured, so a bogus header cannot park a node for the whole run.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

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
    pub http: reqwest::Client,
    pub base: String,
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
    http: &reqwest::Client,
    base: &str,
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
        let response = http
            .post(format!("{base}/api/agent/enroll"))
            .json(&request)
            .send()
            .await
            .context("enroll: no answer from the server")?;
        let status = response.status();
        if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
            tokio::time::sleep(retry_after(&response).unwrap_or(Duration::from_secs(1))).await;
            continue;
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            bail!("enroll: {status}: {body}");
        }
        let enrolled: EnrollResponse = response.json().await.context("enroll: bad answer")?;
        return Ok(Node {
            id: enrolled.node_id,
            token: enrolled.node_token,
            environment_id: enrolled.environment_id,
            labels,
        });
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
                events_in: Some(events_in),
                events_out: Some(events_in - errors),
                errors_total: Some(errors),
                uptime_seconds: Some(since.elapsed().as_secs() as i64),
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
    }
}

enum Poll {
    Changed {
        config: ConfigResponse,
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
    let mut request = fleet
        .http
        .post(format!("{}/api/agent/config", fleet.base))
        .bearer_auth(token)
        .json(heartbeat);
    if let Some(etag) = etag {
        request = request.header(header::IF_NONE_MATCH, etag);
    }
    let response = request.send().await?;
    let status = response.status();
    if status == StatusCode::NOT_MODIFIED {
        return Ok(Poll::NotModified);
    }
    if !status.is_success() {
        let retry_after = match status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                retry_after(&response)
            }
            _ => None,
        };
        return Ok(Poll::Refused {
            status: status.as_u16(),
            retry_after,
        });
    }
    let new_etag = response
        .headers()
        .get(header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let config = response.json().await?;
    Ok(Poll::Changed { config, new_etag })
}

/// `Retry-After` in seconds (the server does not use the HTTP-date form).
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}
