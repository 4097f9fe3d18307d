use std::time::Duration;

use vf_agent::{retry_delay, Agent, AgentError, DEFAULT_POLL_INTERVAL, MAX_DELAY};

use crate::fake_server::{pipeline, FakeServer};

#[tokio::test]
async fn revoked_node_token_is_reported_as_unauthorized_and_retried_slowly() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(server.options(dir.path())).await.unwrap();
    server.revoke(agent.node_id());

    let error = agent.poll_once().await.unwrap_err();

    assert!(matches!(error, AgentError::Unauthorized), "{error}");
    assert!(retry_delay(&error, 0, 0.0) >= MAX_DELAY / 2);
    assert!(retry_delay(&error, 0, 1.0) <= MAX_DELAY);
}

#[tokio::test]
async fn overloaded_server_retry_after_is_honoured() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(server.options(dir.path())).await.unwrap();
    server.overload(Some(7));

    let error = agent.poll_once().await.unwrap_err();

    assert!(matches!(error, AgentError::Overloaded { status: 503, .. }));
    assert_eq!(retry_delay(&error, 5, 0.5), Duration::from_secs(7));
}

#[tokio::test]
async fn poll_interval_follows_the_server_unless_overridden() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    server.set_poll_interval_ms(2_500);
    let mut agent = Agent::start(server.options(dir.path())).await.unwrap();
    assert_eq!(agent.poll_interval(), DEFAULT_POLL_INTERVAL);
    agent.poll_once().await.unwrap();
    assert_eq!(agent.poll_interval(), Duration::from_millis(2_500));

    let mut options = server.options(dir.path());
    options.poll_interval_override = Some(Duration::from_millis(20));
    let mut overridden = Agent::start(options).await.unwrap();
    overridden.poll_once().await.unwrap();
    assert_eq!(overridden.poll_interval(), Duration::from_millis(20));
}

#[tokio::test]
async fn heartbeat_route_delivers_the_same_report_without_polling() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(server.options(dir.path())).await.unwrap();
    server.serve(vec![pipeline("p1", 4, "a: 1\n")]);
    agent.poll_once().await.unwrap();

    agent.send_heartbeat().await.unwrap();

    assert_eq!(server.config_statuses().len(), 1);
    let heartbeat = server.heartbeats(agent.node_id()).pop().unwrap();
    assert_eq!(heartbeat.pipelines[0].version, 4);
    assert_eq!(heartbeat.labels.unwrap()["region"], "eu");
}

#[tokio::test]
async fn run_loop_keeps_polling_until_shutdown() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut options = server.options(dir.path());
    options.poll_interval_override = Some(Duration::from_millis(10));
    let agent = Agent::start(options).await.unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(agent.run(async {
        let _ = stop_rx.await;
    }));

    server.wait_for_polls(3).await;
    stop_tx.send(()).unwrap();

    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("run loop did not stop on shutdown")
        .unwrap();
}

#[tokio::test]
async fn run_loop_survives_a_revoked_token_and_still_stops_on_shutdown() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(server.options(dir.path())).await.unwrap();
    server.revoke(agent.node_id());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(agent.run(async {
        let _ = stop_rx.await;
    }));

    server.wait_for_polls(1).await;
    stop_tx.send(()).unwrap();

    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("run loop did not stop while backing off")
        .unwrap();
    assert_eq!(server.config_statuses(), [401]);
}
