//! `POST /api/agent/heartbeat`: reports become pipeline status and per-minute metrics.

use reqwest::StatusCode;
use serde_json::{json, Value};
use vf_control::heartbeat::MAX_DELTA_PER_REPORT;
use vf_control::{fleet, pipelines};
use vf_protocol::ConfigResponse;

use crate::helpers::{labels, operator, TestApp, MINUTE, T0};

fn running(pipeline_id: &str, events_in: i64) -> Value {
    json!({ "pipelines": [{
        "pipelineId": pipeline_id, "version": 1, "status": "RUNNING",
        "eventsIn": events_in, "eventsOut": events_in
    }]})
}

#[tokio::test]
async fn a_heartbeat_is_acknowledged_with_ok() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;

    let resp = app
        .post_heartbeat(&node.node_token, running(&pipeline.id, 5).to_string())
        .await;

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.json::<Value>().await.unwrap(), json!({ "ok": true }));
    assert_eq!(app.node_view(&node.node_id).await.pipelines[0].events_in, 5);
}

#[tokio::test]
async fn a_counter_that_goes_down_counts_its_new_value_as_the_delta() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;
    let send = |events_in: i64| {
        app.post_heartbeat(
            &node.node_token,
            running(&pipeline.id, events_in).to_string(),
        )
    };

    assert_eq!(send(100).await.status(), StatusCode::OK);
    app.clock.advance_ms(10_000);
    assert_eq!(send(250).await.status(), StatusCode::OK);
    app.clock.advance_ms(MINUTE);
    // The process restarted: 40 events since, not -210.
    assert_eq!(send(40).await.status(), StatusCode::OK);

    let minutes: Vec<(i64, i64, i64)> = app
        .minutes(&pipeline.id)
        .await
        .iter()
        .map(|m| (m.minute, m.events_in, m.events_out))
        .collect();
    assert_eq!(minutes, vec![(T0, 250, 250), (T0 + MINUTE, 40, 40)]);
    assert_eq!(
        app.node_view(&node.node_id).await.pipelines[0].events_in,
        40
    );
}

#[tokio::test]
async fn unknown_fields_in_enroll_and_heartbeat_are_ignored() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;

    let resp = app
        .post_enroll(
            json!({
                "token": crate::helpers::ENROLLMENT_TOKEN,
                "hostname": "future-1",
                "capabilities": ["otlp", "wasm"],
                "hardware": { "cpus": 8 }
            })
            .to_string(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let node: vf_protocol::EnrollResponse = resp.json().await.unwrap();

    let body = json!({
        "pipelines": [{
            "pipelineId": pipeline.id, "version": 1, "status": "RUNNING",
            "eventsIn": 7, "gpuSeconds": 1.5, "spans": { "in": 3 }
        }],
        "sessionId": "abc",
        "plugins": [1, 2, 3]
    });
    let resp = app.post_heartbeat(&node.node_token, body.to_string()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let view = app.node_view(&node.node_id).await;
    assert_eq!(view.node.hostname, "future-1");
    assert_eq!(view.pipelines[0].events_in, 7);
}

#[tokio::test]
async fn an_unknown_process_status_is_stored_as_reported() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;

    let body = json!({ "pipelines": [{
        "pipelineId": pipeline.id, "version": 1, "status": "WARMING_UP"
    }]});
    let resp = app.post_heartbeat(&node.node_token, body.to_string()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        app.node_view(&node.node_id).await.pipelines[0].status,
        "WARMING_UP"
    );
}

#[tokio::test]
async fn a_node_cannot_report_on_a_pipeline_of_another_environment() {
    let app = TestApp::spawn().await;
    let db = &app.control.db;
    let other = fleet::create_environment(db, &operator(), "production", app.now())
        .await
        .unwrap();
    let foreign = pipelines::create_pipeline(
        db,
        &operator(),
        &other.id,
        "prod-logs",
        labels(&[]),
        app.now(),
    )
    .await
    .unwrap();
    let node = app.enroll("edge-1", &[]).await;

    let resp = app
        .post_heartbeat(
            &node.node_token,
            running(&foreign.id, 1_000_000).to_string(),
        )
        .await;

    assert_eq!(resp.status(), StatusCode::OK);
    assert!(app.node_view(&node.node_id).await.pipelines.is_empty());
    assert!(app.minutes(&foreign.id).await.is_empty());
}

#[tokio::test]
async fn a_node_reporting_labels_outside_the_selector_is_not_served_the_pipeline_in_that_answer() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[("tier", "edge")]).await;
    app.deploy(&pipeline.id, "sources: {}\n").await;
    let node = app.enroll("edge-1", &[("tier", "edge")]).await;
    let before: ConfigResponse = app
        .get_config(&node.node_token, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(before.pipelines.len(), 1);

    // The agent restarted with new labels: its first round trip reports them.
    let body = json!({ "pipelines": [], "labels": { "tier": "core" } });
    let resp = app.post_config(&node.node_token, body.to_string()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let doc: ConfigResponse = resp.json().await.unwrap();
    assert!(doc.pipelines.is_empty(), "{doc:?}");
    assert_eq!(
        app.node_view(&node.node_id).await.labels,
        labels(&[("tier", "core")])
    );
}

/// A node reporting absurd counters (a wrapped u64, a bug) must not fail its own polls nor
/// leave a per-minute row the throughput gate can no longer read: the absurd delta counts as
/// `MAX_DELTA_PER_REPORT`, and what follows (a restart at 5, then 10) counts as usual.
async fn an_absurd_counter_is_capped_instead_of_breaking_polls(app: TestApp) {
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;

    for events_in in [i64::MAX, 5, 10] {
        let resp = app
            .post_config(
                &node.node_token,
                running(&pipeline.id, events_in).to_string(),
            )
            .await;
        assert_eq!(resp.status(), StatusCode::OK, "after reporting {events_in}");
    }

    let minutes: Vec<(i64, i64)> = app
        .minutes(&pipeline.id)
        .await
        .iter()
        .map(|m| (m.minute, m.events_in))
        .collect();
    assert_eq!(minutes, vec![(T0, MAX_DELTA_PER_REPORT + 10)]);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    // eventsIn and eventsOut of the first report.
    assert!(
        metrics.contains("vectorflow_counter_deltas_clamped_total 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_absurd_counter_is_capped_instead_of_breaking_polls_on_sqlite() {
    an_absurd_counter_is_capped_instead_of_breaking_polls(TestApp::spawn().await).await;
}

#[tokio::test]
async fn an_absurd_counter_is_capped_instead_of_breaking_polls_on_postgres() {
    an_absurd_counter_is_capped_instead_of_breaking_polls(TestApp::spawn_postgres().await).await;
}

/// Many nodes report at once, so their heartbeats share transactions: every node's status is
/// its own last report and the pipeline's minute holds the sum of everyone's counts, no more
/// and no less.
async fn heartbeats_arriving_together_are_all_counted_once(app: TestApp) {
    let pipeline = app.create_pipeline("logs", &[]).await;
    let mut nodes = Vec::new();
    for i in 0..30 {
        nodes.push(app.enroll(&format!("edge-{i}"), &[]).await);
    }
    let reports = [10, 25, 40, 70];
    futures::future::join_all(nodes.iter().map(|node| async {
        for events_in in reports {
            let resp = app
                .post_heartbeat(
                    &node.node_token,
                    running(&pipeline.id, events_in).to_string(),
                )
                .await;
            assert_eq!(resp.status(), StatusCode::OK);
        }
    }))
    .await;

    let minutes = app.minutes(&pipeline.id).await;
    assert_eq!(minutes.len(), 1);
    assert_eq!(minutes[0].events_in, 30 * 70);
    for node in &nodes {
        assert_eq!(
            app.node_view(&node.node_id).await.pipelines[0].events_in,
            70
        );
    }
}

#[tokio::test]
async fn heartbeats_arriving_together_are_all_counted_once_on_sqlite() {
    heartbeats_arriving_together_are_all_counted_once(TestApp::spawn().await).await;
}

#[tokio::test]
async fn heartbeats_arriving_together_are_all_counted_once_on_postgres() {
    heartbeats_arriving_together_are_all_counted_once(TestApp::spawn_postgres().await).await;
}

/// A report for a pipeline id no pipeline has, even one PostgreSQL could not store (a NUL),
/// is ignored: the heartbeat is still acknowledged.
#[tokio::test]
async fn a_report_for_a_made_up_pipeline_id_is_ignored_on_postgres() {
    let app = TestApp::spawn_postgres().await;
    let node = app.enroll("edge-1", &[]).await;
    let resp = app
        .post_heartbeat(&node.node_token, running("\u{0}", 5).to_string())
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(app.node_view(&node.node_id).await.pipelines.is_empty());
}
