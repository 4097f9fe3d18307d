//! The push client: holds the server's push stream (`GET /api/agent/push`,
//! `text/event-stream`) open and hands each message to the poll loop, so a changed config is
//! polled at once instead of at the next interval. Push is only a hint: the agent keeps
//! polling on its interval throughout, and delivery is decided by those polls.
//!
//! The stream reconnects by itself with backoff (exponential with jitter, the slowest step for
//! a refused token) and is treated as lost when nothing, not even a keepalive comment, arrived
//! for [`SILENCE`].

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use tokio::sync::mpsc;
use vf_protocol::PushMessage;

use crate::backoff::backoff_delay;

/// The server sends a keepalive at least every 25 s; twice that in silence means the
/// connection is gone even if no error says so.
pub const SILENCE: Duration = Duration::from_secs(50);
/// How long to wait for the connection to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Splits a server-sent-events byte stream into the `data` of each event. Comments (`:`),
/// `event:`, `id:` and `retry:` lines are skipped; several `data:` lines of one event are
/// joined with newlines, as the SSE standard says.
#[derive(Debug, Default)]
pub struct EventParser {
    pending: String,
}

impl EventParser {
    /// Feeds the next chunk; returns the data of every event it completed.
    pub fn feed(&mut self, chunk: &str) -> Vec<String> {
        self.pending.push_str(&chunk.replace("\r\n", "\n"));
        let mut out = Vec::new();
        while let Some(end) = self.pending.find("\n\n") {
            let block: String = self.pending.drain(..end + 2).collect();
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                out.push(data.join("\n"));
            }
        }
        out
    }
}

/// Counters of the push connection for the agent's own health report.
#[derive(Debug, Default)]
pub struct PushHealth {
    pub connected: AtomicBool,
    pub reconnects: AtomicI64,
}

/// A running push connection: its messages, and how it is doing. Dropping it ends the task.
#[derive(Debug)]
pub struct PushFeed {
    pub messages: mpsc::Receiver<PushMessage>,
    pub health: Arc<PushHealth>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PushFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PushFeed {
    /// Connects to `url` with `node_token`, in the background, until dropped.
    pub fn spawn(url: String, node_token: String) -> PushFeed {
        let (tx, messages) = mpsc::channel(64);
        let health = Arc::new(PushHealth::default());
        let task = tokio::spawn(listen(url, node_token, tx, health.clone()));
        PushFeed {
            messages,
            health,
            task,
        }
    }
}

/// Why one connection ended.
enum Ended {
    /// The agent stopped reading: end for good.
    Closed,
    /// 401: the token was refused; retry slowly.
    Refused,
    /// Anything else: retry with backoff.
    Lost(String),
}

async fn listen(
    url: String,
    token: String,
    tx: mpsc::Sender<PushMessage>,
    health: Arc<PushHealth>,
) {
    // No overall timeout: the stream is meant to stay open.
    let http = match reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("vf-agent/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(http) => http,
        Err(e) => {
            tracing::warn!("push: cannot build an HTTP client: {e}");
            return;
        }
    };
    let mut failures: u32 = 0;
    loop {
        let ended = connect_once(&http, &url, &token, &tx, &health, &mut failures).await;
        health.connected.store(false, Ordering::Relaxed);
        let delay = match ended {
            Ended::Closed => return,
            Ended::Refused => {
                tracing::warn!("push: the server refused the node token");
                backoff_delay(u32::MAX, rand::random::<f64>())
            }
            Ended::Lost(why) => {
                tracing::debug!("push: connection lost ({why}); reconnecting");
                backoff_delay(failures, rand::random::<f64>())
            }
        };
        failures = failures.saturating_add(1);
        health.reconnects.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(delay).await;
    }
}

async fn connect_once(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    tx: &mpsc::Sender<PushMessage>,
    health: &PushHealth,
    failures: &mut u32,
) -> Ended {
    let mut resp = match http.get(url).bearer_auth(token).send().await {
        Ok(resp) => resp,
        Err(e) => return Ended::Lost(e.to_string()),
    };
    match resp.status() {
        StatusCode::OK => {}
        StatusCode::UNAUTHORIZED => return Ended::Refused,
        other => return Ended::Lost(format!("HTTP {other}")),
    }
    health.connected.store(true, Ordering::Relaxed);
    *failures = 0;
    let mut parser = EventParser::default();
    loop {
        let chunk = match tokio::time::timeout(SILENCE, resp.chunk()).await {
            Err(_) => return Ended::Lost("silent for too long".into()),
            Ok(Err(e)) => return Ended::Lost(e.to_string()),
            Ok(Ok(None)) => return Ended::Lost("the server ended the stream".into()),
            Ok(Ok(Some(chunk))) => chunk,
        };
        for data in parser.feed(&String::from_utf8_lossy(&chunk)) {
            match serde_json::from_str::<PushMessage>(&data) {
                Ok(message) => {
                    if tx.send(message).await.is_err() {
                        return Ended::Closed;
                    }
                }
                // A message type this agent does not know: ignored, as the protocol says.
                Err(e) => tracing::debug!("push: ignoring a message ({e})"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_whole_however_the_bytes_are_split() {
        let mut p = EventParser::default();
        assert!(
            p.feed(": keepalive\n\n").is_empty(),
            "a comment is no event"
        );
        assert!(p.feed("event: config_changed\ndata: {\"a\"").is_empty());
        assert_eq!(p.feed(":1}\n\n"), vec!["{\"a\":1}"]);
        assert_eq!(
            p.feed("data: one\r\ndata: two\r\n\r\ndata:x\n\n"),
            vec!["one\ntwo", "x"]
        );
    }
}
