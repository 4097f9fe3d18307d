//! Two server processes on one PostgreSQL database, both ticking every 50 ms, completing and
//! rolling back releases, while nodes poll both replicas in turn: every answer is recorded,
//! and no node ever sees a pipeline's version step back or a pipeline it was running
//! vanish. A transition committed by one replica is what the other serves next.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};
use vf_control::testing::{fencing_violations, ServedVersions, TestDb};

use crate::fixture::{health_window_stage, stage, wall_clock_ms, Fixture, BAKE_MS};
use crate::server::ServerProcess;

const RELEASES: usize = 12;
const NODES: usize = 4;
/// Room for two server starts on a busy machine before the shared deadline.
const DEADLINE_IN_MS: i64 = 8_000;
/// How long after the deadline both schedulers together may take to decide everything.
const DECIDE_WITHIN_MS: i64 = 15_000;
const TICK: &[(&str, &str)] = &[("VF_SCHEDULER_INTERVAL_MS", "50")];

/// `pipeline id -> version` of one answer.
type Answer = ServedVersions;

async fn poll(client: &reqwest::Client, addr: SocketAddr, token: &str) -> Answer {
    let resp = client
        .get(format!("http://{addr}/api/agent/config"))
        .bearer_auth(token)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("poll");
    assert_eq!(resp.status(), 200);
    let doc: Value = resp.json().await.expect("a config document");
    doc["pipelines"]
        .as_array()
        .expect("pipelines")
        .iter()
        .map(|p| {
            (
                p["pipelineId"].as_str().unwrap().to_string(),
                p["version"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn nodes_polling_two_replicas_never_step_back_while_both_schedulers_decide() {
    let db = TestDb::postgres().await;
    let fixture = Fixture::open(&db.url, wall_clock_ms()).await;
    let mut tokens = Vec::new();
    for i in 0..NODES {
        tokens.push(fixture.enroll(&format!("edge-{i}")).await.node_token);
    }
    let mut pipelines = Vec::new();
    for i in 0..RELEASES {
        pipelines.push(fixture.pipeline_on_v1(&format!("logs-{i}")).await.id);
    }
    fixture
        .clock
        .set_ms(wall_clock_ms() + DEADLINE_IN_MS - BAKE_MS);
    let mut ids = Vec::new();
    for (i, pipeline_id) in pipelines.iter().enumerate() {
        // Half complete (half the nodes already run v2), half fail closed and roll back.
        let plan = if i % 2 == 0 {
            json!({ "stages": [health_window_stage(50)] })
        } else {
            json!({ "stages": [stage(
                json!({ "percentage": 50 }),
                json!([{ "errorRate": { "maxPercent": 5 } }]),
            )] })
        };
        ids.push(fixture.create_release(pipeline_id, "v: 2\n", plan).await.id);
    }
    let deadline = fixture.now() + BAKE_MS;
    fixture.close().await;

    let mut a = ServerProcess::spawn("replica-a", &db.url, TICK);
    let mut b = ServerProcess::spawn("replica-b", &db.url, TICK);
    a.wait_ready().await;
    b.wait_ready().await;
    assert!(
        wall_clock_ms() < deadline,
        "both replicas were ready only {} ms after the shared deadline",
        wall_clock_ms() - deadline
    );

    // Every node polls A, then B, then A... from before the deadline until everything is
    // decided and a little after.
    let watcher = Fixture::reopen(&db.url).await;
    let stop_at = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(i64::MAX));
    let pollers: Vec<_> = tokens
        .iter()
        .map(|token| {
            let (token, stop_at) = (token.clone(), stop_at.clone());
            let replicas = [("from replica A", a.addr), ("from replica B", b.addr)];
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut answers = Vec::new();
                let mut i = 0;
                while wall_clock_ms() < stop_at.load(std::sync::atomic::Ordering::SeqCst) {
                    let (name, addr) = replicas[i % 2];
                    answers.push((name.to_string(), poll(&client, addr, &token).await));
                    i += 1;
                }
                answers
            })
        })
        .collect();
    loop {
        let mut pending = 0;
        for id in &ids {
            if watcher.release(id).await.state.status.in_flight() {
                pending += 1;
            }
        }
        if pending == 0 {
            break;
        }
        assert!(
            wall_clock_ms() < deadline + DECIDE_WITHIN_MS,
            "{pending} releases still undecided {DECIDE_WITHIN_MS} ms after their deadline"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_at.store(wall_clock_ms() + 500, std::sync::atomic::Ordering::SeqCst);

    let mut all = Vec::new();
    let mut polls = 0;
    for (node, poller) in pollers.into_iter().enumerate() {
        let answers = poller.await.unwrap();
        polls += answers.len();
        all.extend(fencing_violations(&format!("node {node}"), &answers));
        let (_, last) = answers.last().unwrap();
        assert_eq!(last.len(), RELEASES, "node {node} ends with every pipeline");
        for (i, pipeline_id) in pipelines.iter().enumerate() {
            // Completed: the canary (v2); rolled back: the reverted config (v3).
            let expected = if i % 2 == 0 { 2 } else { 3 };
            assert_eq!(last[pipeline_id], expected, "node {node}, pipeline {i}");
        }
    }
    assert!(
        all.is_empty(),
        "{} violations in {polls} polls:\n{}",
        all.len(),
        all.join("\n")
    );
    watcher.close().await;
    a.stop().await;
    b.stop().await;
}
