//! SIGTERM drains: a request the server is reading when the signal arrives is finished and
//! answered, new connections are refused from then on, and the process exits 0.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::{Connection, SqliteConnection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use vf_control::fleet;
use vf_control::pipelines::PipelineRow;
use vf_control::testing::TestDb;
use vf_protocol::{EnrollRequest, EnrollResponse};

use crate::fixture::{wall_clock_ms, Fixture, ENROLLMENT_TOKEN};
use crate::server::ServerProcess;

/// Bounds every read and write on the raw connection.
const IO_WITHIN: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_request_in_flight_when_sigterm_arrives_completes_before_the_server_exits() {
    let db = TestDb::sqlite();
    let (pipeline, env_id) = logs_on_v1(&db).await;
    let (mut server, node) = start_and_enroll(&db, ("VF_SCHEDULER_INTERVAL_MS", "1000")).await;

    // The heartbeat's headers, with `Expect: 100-continue`: the server answers
    // `100 Continue` only once the handler starts reading the body, so the test knows the
    // request is in flight before it sends the signal.
    let body = json!({ "pipelines": [{
        "pipelineId": pipeline.id, "version": 1, "status": "RUNNING",
        "eventsIn": 7, "eventsOut": 7
    }]})
    .to_string();
    let (head, tail) = body.split_at(body.len() / 2);
    let mut conn = timeout(IO_WITHIN, TcpStream::connect(server.addr))
        .await
        .expect("connect within the bound")
        .expect("connect to the server");
    let request = format!(
        "POST /api/agent/heartbeat HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\
         Connection: close\r\n\r\n",
        server.addr,
        node.node_token,
        body.len()
    );
    write(&mut conn, request.as_bytes()).await;
    let interim = read_head(&mut conn).await;
    assert!(
        interim.starts_with("HTTP/1.1 100 Continue"),
        "expected 100 Continue, got {interim:?}"
    );
    write(&mut conn, head.as_bytes()).await;

    sigterm(&mut server).await;
    // Draining: the listener is closed, while the request above is still open.
    wait_until_refused(&server).await;

    write(&mut conn, tail.as_bytes()).await;
    let mut answer = Vec::new();
    timeout(IO_WITHIN, conn.read_to_end(&mut answer))
        .await
        .expect("the answer within the bound")
        .expect("read the answer");
    let answer = String::from_utf8_lossy(&answer);
    let (status_line, rest) = answer.split_once("\r\n").unwrap_or((&answer, ""));
    assert_eq!(status_line, "HTTP/1.1 200 OK", "{answer}");
    let (_, payload) = rest.split_once("\r\n\r\n").unwrap_or(("", ""));
    let payload: Value =
        serde_json::from_str(payload).unwrap_or_else(|e| panic!("not a JSON body ({e}): {answer}"));
    assert_eq!(payload, json!({ "ok": true }));

    let status = server.wait_exit(IO_WITHIN).await;
    assert!(status.success(), "exited with {status} after SIGTERM");
    assert_eq!(status.code(), Some(0));
    assert!(
        TcpStream::connect(server.addr).await.is_err(),
        "a connection after exit was accepted"
    );

    // The heartbeat was recorded before the process went away.
    let view = stored_view(&db, &env_id, &node.node_id).await;
    assert!(view.node.last_seen_at.is_some(), "{view:?}");
    assert_eq!(view.pipelines.len(), 1, "{view:?}");
    assert_eq!(view.pipelines[0].pipeline_id, pipeline.id);
    assert_eq!(view.pipelines[0].events_in, 7);
    assert_eq!(view.pipelines[0].status, "RUNNING");
}

/// Last-seen times are written in batches; a graceful shutdown writes what is pending, so
/// a node that polled just before SIGTERM is not shown as never seen after the restart.
#[tokio::test]
async fn a_graceful_shutdown_writes_the_last_seen_times_still_pending() {
    let db = TestDb::sqlite();
    let fixture = Fixture::open(&db.url, wall_clock_ms()).await;
    let env_id = fixture.env_id.clone();
    fixture.close().await;
    // No periodic flush: only the shutdown's can write the poll below.
    let (mut server, node) = start_and_enroll(&db, ("VF_LAST_SEEN_FLUSH_MS", "0")).await;
    let before = wall_clock_ms();
    let polled = reqwest::Client::new()
        .get(format!("{}/api/agent/config", server.url))
        .bearer_auth(&node.node_token)
        .timeout(IO_WITHIN)
        .send()
        .await
        .expect("poll");
    assert_eq!(polled.status(), StatusCode::OK);
    server.stop().await;

    let view = stored_view(&db, &env_id, &node.node_id).await;
    let seen = view.node.last_seen_at.expect("the poll's time was written");
    assert!(seen >= before, "last seen {seen}, polled after {before}");
}

/// A heartbeat is answered before it is written (group commit); a graceful shutdown writes
/// those still queued. Another connection holds SQLite's write lock while three heartbeats
/// are answered, so all three are still queued when SIGTERM arrives.
#[tokio::test]
async fn a_graceful_shutdown_writes_the_heartbeats_answered_but_not_yet_written() {
    let db = TestDb::sqlite();
    let (pipeline, env_id) = logs_on_v1(&db).await;
    let (mut server, node) = start_and_enroll(&db, ("VF_LAST_SEEN_FLUSH_MS", "0")).await;

    let mut holder = SqliteConnection::connect(&db.url).await.expect("connect");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .expect("take the write lock");
    let client = reqwest::Client::new();
    for events in [10, 20, 30] {
        let body = json!({ "pipelines": [{
            "pipelineId": pipeline.id, "version": 1, "status": "RUNNING", "eventsIn": events
        }]});
        let resp = client
            .post(format!("{}/api/agent/heartbeat", server.url))
            .bearer_auth(&node.node_token)
            .json(&body)
            .timeout(IO_WITHIN)
            .send()
            .await
            .expect("heartbeat");
        assert_eq!(
            resp.status(),
            StatusCode::OK,
            "answered while the writer waits"
        );
    }

    sigterm(&mut server).await;
    // The server has stopped serving and waits for its writer, which waits for the lock.
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("let the lock go");
    let status = server.wait_exit(IO_WITHIN).await;
    assert!(status.success(), "exited with {status} after SIGTERM");

    let view = stored_view(&db, &env_id, &node.node_id).await;
    let report = view.pipelines.first().expect("the heartbeats were written");
    assert_eq!(report.events_in, 30, "{view:?}");
}

/// Sends SIGTERM and returns once the server says it is draining.
async fn sigterm(server: &mut ServerProcess) {
    server.terminate();
    server
        .wait_for_log(
            "shutdown signal received; finishing in-flight requests",
            IO_WITHIN,
        )
        .await;
}

/// A pipeline "logs" with v1 deployed, written before the server starts, and its
/// environment's id.
async fn logs_on_v1(db: &TestDb) -> (PipelineRow, String) {
    let fixture = Fixture::open(&db.url, wall_clock_ms()).await;
    let pipeline = fixture.pipeline_on_v1("logs").await;
    let env_id = fixture.env_id.clone();
    fixture.close().await;
    (pipeline, env_id)
}

/// The server binary on `db` with the bootstrap enrollment token and `extra`, and one node
/// enrolled over HTTP.
async fn start_and_enroll(db: &TestDb, extra: (&str, &str)) -> (ServerProcess, EnrollResponse) {
    let server = ServerProcess::start(
        "server",
        &db.url,
        &[("VF_BOOTSTRAP_ENROLLMENT_TOKEN", ENROLLMENT_TOKEN), extra],
    )
    .await;
    let node = enroll(&server).await;
    (server, node)
}

/// The node as the database holds it after the server exited (the library's fleet view).
async fn stored_view(db: &TestDb, env_id: &str, node_id: &str) -> fleet::NodeView {
    let fixture = Fixture::reopen(&db.url).await;
    let view = fleet::fleet(&fixture.control.db, env_id, wall_clock_ms())
        .await
        .unwrap()
        .into_iter()
        .find(|n| n.node.id == node_id)
        .expect("the enrolled node is in the fleet");
    fixture.close().await;
    view
}

/// Enrolls a node over HTTP with the bootstrap enrollment token.
async fn enroll(server: &ServerProcess) -> EnrollResponse {
    let request = EnrollRequest {
        token: ENROLLMENT_TOKEN.to_string(),
        hostname: "edge-1".to_string(),
        os: Some("linux".to_string()),
        agent_version: Some("1.2.3".to_string()),
        vector_version: None,
        labels: Some(BTreeMap::new()),
    };
    let resp = reqwest::Client::new()
        .post(format!("{}/api/agent/enroll", server.url))
        .json(&request)
        .timeout(IO_WITHIN)
        .send()
        .await
        .expect("enroll");
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json().await.expect("an enrollment answer")
}

async fn write(conn: &mut TcpStream, bytes: &[u8]) {
    timeout(IO_WITHIN, conn.write_all(bytes))
        .await
        .expect("write within the bound")
        .expect("write to the server");
}

/// Reads one response head (up to the blank line).
async fn read_head(conn: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = timeout(IO_WITHIN, conn.read(&mut byte))
            .await
            .expect("a response head within the bound")
            .expect("read from the server");
        assert!(n == 1, "the server closed the connection after {head:?}");
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Polls until connecting to the server's port is refused.
async fn wait_until_refused(server: &ServerProcess) {
    let started = Instant::now();
    loop {
        match TcpStream::connect(server.addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return,
            other => assert!(
                started.elapsed() < IO_WITHIN,
                "{}: still accepting connections {IO_WITHIN:?} after SIGTERM: {other:?}",
                server.name()
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
