//! How long a rollback takes to reach a fleet: from the moment it commits until every agent
//! has fetched the reverted version, agents polling every `poll_every`, with and without the
//! push stream. Each simulated agent is what vf-agent does, stripped to the wire: it polls
//! the config route on its interval (first polls spread over one interval), and with push it
//! holds `GET /api/agent/push` open and polls at once on `config_changed`.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vf_control::testing::TestDb;

use crate::fleet::{Fleet, Stage};

/// The version of the bench pipeline a config answer serves (0 when none).
fn served_version(body: &serde_json::Value) -> i64 {
    body["pipelines"][0]["version"].as_i64().unwrap_or(0)
}

struct SimAgent {
    url: String,
    token: String,
    http: reqwest::Client,
    fetched: AtomicI64,
}

impl SimAgent {
    async fn poll(&self) {
        let answer = self
            .http
            .get(format!("{}/api/agent/config", self.url))
            .bearer_auth(&self.token)
            .send()
            .await;
        if let Ok(resp) = answer {
            if let Ok(body) = resp.json::<serde_json::Value>().await {
                self.fetched.store(served_version(&body), Ordering::SeqCst);
            }
        }
    }

    /// Polls every `every`, the first after `offset`.
    async fn poll_loop(self: Arc<Self>, offset: Duration, every: Duration) {
        tokio::time::sleep(offset).await;
        loop {
            self.poll().await;
            tokio::time::sleep(every).await;
        }
    }

    /// Holds the push stream and polls on every message; counts itself in `open` once
    /// connected.
    async fn push_loop(self: Arc<Self>, open: Arc<AtomicUsize>) {
        let Ok(mut resp) = self
            .http
            .get(format!("{}/api/agent/push", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
        else {
            return;
        };
        open.fetch_add(1, Ordering::SeqCst);
        let mut pending = String::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find("\n\n") {
                let event: String = pending.drain(..end + 2).collect();
                if event.contains("\"config_changed\"") {
                    self.poll().await;
                }
            }
        }
    }
}

/// Starts `agents` agents on a fresh fleet, puts them all on v2 with a release at 100 %,
/// rolls it back and returns how long until every agent fetched what the rollback serves.
pub async fn rollback_reach(agents: usize, poll_every: Duration, push: bool) -> Duration {
    let fleet = Fleet::start(TestDb::sqlite(), agents).await;
    let release = fleet.release(Stage::Percent(100)).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(agents * 2)
        .build()
        .unwrap();
    let open = Arc::new(AtomicUsize::new(0));
    let sims: Vec<Arc<SimAgent>> = fleet
        .tokens
        .iter()
        .map(|token| {
            Arc::new(SimAgent {
                url: fleet.url.clone(),
                token: token.clone(),
                http: http.clone(),
                fetched: AtomicI64::new(0),
            })
        })
        .collect();
    let mut tasks = Vec::new();
    for (i, sim) in sims.iter().enumerate() {
        // Everyone fetches v2 first, then polls on its own phase of the interval.
        sim.poll().await;
        let offset = poll_every.mul_f64(i as f64 / agents as f64);
        tasks.push(tokio::spawn(
            sim.clone().poll_loop(offset + poll_every, poll_every),
        ));
        if push {
            tasks.push(tokio::spawn(sim.clone().push_loop(open.clone())));
        }
    }
    assert!(
        sims.iter().all(|s| s.fetched.load(Ordering::SeqCst) == 2),
        "every agent runs the canary before the rollback"
    );
    if push {
        while fleet.control.push.connected() < agents {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // A full interval on, every agent polls in its own phase, as a fleet in steady state does.
    tokio::time::sleep(poll_every).await;
    fleet.rollback(&release).await;
    let started = Instant::now();
    // What the rollback serves (the previous config, as the version the rollback names).
    let probe = SimAgent {
        url: fleet.url.clone(),
        token: sims[0].token.clone(),
        http: http.clone(),
        fetched: AtomicI64::new(0),
    };
    probe.poll().await;
    let reverted = probe.fetched.load(Ordering::SeqCst);
    assert_ne!(
        reverted, 2,
        "the rollback serves something other than the canary"
    );
    while sims
        .iter()
        .any(|s| s.fetched.load(Ordering::SeqCst) != reverted)
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let reach = started.elapsed();
    for task in tasks {
        task.abort();
    }
    reach
}
