//! Two server processes on one PostgreSQL database: an agent holds its push stream open on
//! one, operators act through the other, and the stream hears of both the deploy (a
//! `config_changed`) and a sample request for the node, as the live channel promises for
//! replicas behind a load balancer.

use std::time::Duration;

use serde_json::{json, Value};
use vf_control::testing::TestDb;

use crate::fixture::{wall_clock_ms, Fixture};
use crate::server::ServerProcess;

/// How long a message may take to cross from one replica to the other's stream (the
/// watcher reads the generation every 250 ms; a debug build on a busy machine is slow).
const WITHIN: Duration = Duration::from_secs(10);

/// The next message's JSON on an open `text/event-stream`, skipping keepalives.
async fn next_message(resp: &mut reqwest::Response, pending: &mut String) -> Value {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        if let Some(end) = pending.find("\n\n") {
            let block: String = pending.drain(..end + 2).collect();
            if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) {
                return serde_json::from_str(data).unwrap();
            }
            continue;
        }
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(bytes))) => pending.push_str(&String::from_utf8_lossy(&bytes)),
            other => panic!("no push message within {WITHIN:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_change_and_a_request_made_through_one_server_process_reach_a_stream_held_on_another() {
    let db = TestDb::postgres().await;
    let fixture = Fixture::open(&db.url, wall_clock_ms()).await;
    let node = fixture.enroll("edge-1").await;
    let pipeline = fixture.pipeline_on_v1("logs").await;
    let (a, b) = tokio::join!(
        ServerProcess::start("replica-a", &db.url, &[]),
        ServerProcess::start("replica-b", &db.url, &[]),
    );

    let mut stream = reqwest::Client::new()
        .get(format!("{}/api/agent/push", b.url))
        .bearer_auth(&node.node_token)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut pending = String::new();

    a.call(
        "pipeline.deploy",
        json!({"pipeline_id": pipeline.id, "config_yaml": "sources:\n  in: {type: stdin}\n", "changelog": "v2"}),
    )
    .await;
    let message = next_message(&mut stream, &mut pending).await;
    assert_eq!(
        message,
        json!({"type": "config_changed", "pipelineId": pipeline.id, "reason": "now served v2 (was v1)"})
    );

    let request = a
        .call(
            "node.sample",
            json!({"node_id": node.node_id, "pipeline_id": pipeline.id, "component_keys": ["in"]}),
        )
        .await;
    let message = next_message(&mut stream, &mut pending).await;
    assert_eq!(message["type"], "sample_request");
    assert_eq!(message["requestId"], request);
    assert_eq!(message["componentKeys"], json!(["in"]));
}
