//! A config poll is not a database write, nor is the time of a heartbeat that repeats the
//! node's facts: when a node last spoke is kept in memory, shown at once in its status, and
//! written in one batch by the next flush (every second in a running server, and on a
//! graceful shutdown: `server/tests/process/shutdown.rs`).

use vf_control::testing::TestDb;

use crate::helpers::TestApp;

/// A server whose periodic flush is off, so the test decides when one happens.
async fn quiet(db: TestDb) -> TestApp {
    TestApp::spawn_with(db, |c| c.last_seen_flush_ms = None).await
}

async fn stored_last_seen(app: &TestApp, node_id: &str) -> Option<i64> {
    sqlx::query_scalar("SELECT last_seen_at FROM nodes WHERE id = $1")
        .bind(node_id)
        .fetch_one(&app.control.db.pool)
        .await
        .unwrap()
}

async fn a_poll_shows_at_once_and_is_written_by_the_next_flush(app: TestApp) {
    let nodes = [
        app.enroll("edge-1", &[]).await,
        app.enroll("edge-2", &[]).await,
    ];
    let polled_at = app.now();
    for node in &nodes {
        assert_eq!(app.get_config(&node.node_token, None).await.status(), 200);
        assert_eq!(
            stored_last_seen(&app, &node.node_id).await,
            None,
            "the poll wrote nothing"
        );
        let view = app.node_view(&node.node_id).await;
        assert_eq!(view.node.last_seen_at, Some(polled_at));
        assert_eq!(view.status, vf_rules::NodeStatus::Healthy);
    }

    assert_eq!(
        app.control
            .db
            .last_seen
            .flush(&app.control.db)
            .await
            .unwrap(),
        2
    );
    for node in &nodes {
        assert_eq!(stored_last_seen(&app, &node.node_id).await, Some(polled_at));
    }
    assert_eq!(
        app.control
            .db
            .last_seen
            .flush(&app.control.db)
            .await
            .unwrap(),
        0,
        "nothing is written twice"
    );
}

#[tokio::test]
async fn a_poll_shows_at_once_and_is_written_by_the_next_flush_on_sqlite() {
    a_poll_shows_at_once_and_is_written_by_the_next_flush(quiet(TestDb::sqlite()).await).await;
}

#[tokio::test]
async fn a_poll_shows_at_once_and_is_written_by_the_next_flush_on_postgres() {
    a_poll_shows_at_once_and_is_written_by_the_next_flush(quiet(TestDb::postgres().await).await)
        .await;
}

/// A flush never moves a time backwards: a newer time another replica (or a heartbeat)
/// stored stays.
async fn a_flush_never_moves_a_stored_time_backwards(app: TestApp) {
    let node = app.enroll("edge-1", &[]).await;
    let early = app.now();
    assert_eq!(app.get_config(&node.node_token, None).await.status(), 200);
    sqlx::query("UPDATE nodes SET last_seen_at = $1 WHERE id = $2")
        .bind(early + 60_000)
        .bind(&node.node_id)
        .execute(&app.control.db.pool)
        .await
        .unwrap();
    app.control
        .db
        .last_seen
        .flush(&app.control.db)
        .await
        .unwrap();
    assert_eq!(
        stored_last_seen(&app, &node.node_id).await,
        Some(early + 60_000)
    );
}

#[tokio::test]
async fn a_flush_never_moves_a_stored_time_backwards_on_sqlite() {
    a_flush_never_moves_a_stored_time_backwards(quiet(TestDb::sqlite()).await).await;
}

#[tokio::test]
async fn a_flush_never_moves_a_stored_time_backwards_on_postgres() {
    a_flush_never_moves_a_stored_time_backwards(quiet(TestDb::postgres().await).await).await;
}

/// A heartbeat repeating the node's facts writes only its reports; the time joins the
/// batch. A heartbeat with a new fact writes the node row at once.
async fn a_heartbeat_writes_the_node_row_only_when_a_fact_changes(app: TestApp) {
    let node = app.enroll("edge-1", &[]).await;
    let same = serde_json::json!({ "pipelines": [], "agentVersion": "1.2.3" }).to_string();
    assert_eq!(
        app.post_heartbeat(&node.node_token, same).await.status(),
        200
    );
    assert_eq!(stored_last_seen(&app, &node.node_id).await, None);
    let view = app.node_view(&node.node_id).await;
    assert_eq!(view.status, vf_rules::NodeStatus::Healthy);

    app.clock.advance_ms(1_000);
    let upgraded = serde_json::json!({ "pipelines": [], "agentVersion": "1.3.0" }).to_string();
    assert_eq!(
        app.post_heartbeat(&node.node_token, upgraded)
            .await
            .status(),
        200
    );
    assert_eq!(stored_last_seen(&app, &node.node_id).await, Some(app.now()));
    assert_eq!(
        app.node_view(&node.node_id)
            .await
            .node
            .agent_version
            .as_deref(),
        Some("1.3.0")
    );
}

#[tokio::test]
async fn a_heartbeat_writes_the_node_row_only_when_a_fact_changes_on_sqlite() {
    a_heartbeat_writes_the_node_row_only_when_a_fact_changes(quiet(TestDb::sqlite()).await).await;
}

#[tokio::test]
async fn a_heartbeat_writes_the_node_row_only_when_a_fact_changes_on_postgres() {
    a_heartbeat_writes_the_node_row_only_when_a_fact_changes(quiet(TestDb::postgres().await).await)
        .await;
}

/// Gate evidence names a node by the status the fleet views show. The views overlay the
/// contacts not written yet; the proof-of-apply evidence read only the stored time, so a node
/// that had just polled (fleet page: HEALTHY, seen a moment ago) was named UNKNOWN there.
#[tokio::test]
async fn a_held_stage_names_a_node_by_the_status_the_fleet_views_show() {
    let app = quiet(TestDb::sqlite()).await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "v: 1\n").await;
    let node = app.enroll("edge-1", &[("wave", "a")]).await;
    let running_v1 = serde_json::json!({ "pipelines": [{
        "pipelineId": pipeline.id, "version": 1, "status": "RUNNING", "eventsIn": 1
    }]})
    .to_string();
    let (id, _) = app
        .create_release(serde_json::json!({
            "pipeline_id": pipeline.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [
                crate::releases::wave("a", serde_json::json!([{"healthWindow": {}}])),
                crate::releases::wave("b", serde_json::json!([])),
            ]},
        }))
        .await;
    app.clock.advance_ms(30_000);
    // The node polls and reports v1 still running: both kept in memory, nothing stored.
    assert_eq!(app.get_config(&node.node_token, None).await.status(), 200);
    assert_eq!(
        app.post_heartbeat(&node.node_token, running_v1)
            .await
            .status(),
        200
    );
    assert_eq!(stored_last_seen(&app, &node.node_id).await, None);
    let view = app.node_view(&node.node_id).await;
    assert_eq!(view.status, vf_rules::NodeStatus::Healthy);

    assert_eq!(app.decide_after(0).await, "hold");
    let release = app.release(&id).await;
    let hold = release["hold_reason"].as_str().unwrap();
    assert!(hold.contains("edge-1 runs v1 RUNNING"), "{hold}");
    assert!(
        !hold.contains("UNKNOWN") && !hold.contains("UNREACHABLE"),
        "{hold}"
    );
}
