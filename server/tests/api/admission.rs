//! Overload: beyond `VF_AGENT_MAX_CONCURRENCY` requests in flight agents get 503 with
//! `Retry-After`, and an agent refused once is served on its retry.

use reqwest::StatusCode;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::helpers::TestApp;
use vf_control::testing::TestDb;

/// Opens a heartbeat whose body never finishes: it holds its place until dropped.
async fn hold_a_place(app: &TestApp, token: &str) -> TcpStream {
    let addr = app.url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/agent/heartbeat HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

#[tokio::test]
async fn at_the_limit_a_refused_agent_is_served_on_its_retry_and_a_newcomer_is_refused() {
    let app = TestApp::spawn_with(TestDb::sqlite(), |c| c.agent_max_concurrency = 1).await;
    let (a, b, c) = (
        app.enroll("edge-a", &[]).await,
        app.enroll("edge-b", &[]).await,
        app.enroll("edge-c", &[]).await,
    );
    let _held = hold_a_place(&app, &c.node_token).await;
    // The held request is in flight once the server answers others 503.
    let mut first = app.get_config(&a.node_token, None).await;
    for _ in 0..100 {
        if first.status() == StatusCode::SERVICE_UNAVAILABLE {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        first = app.get_config(&a.node_token, None).await;
    }
    assert_eq!(first.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(first.headers()["retry-after"], "5");

    assert_eq!(
        app.get_config(&a.node_token, None).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        app.get_config(&b.node_token, None).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        app.get_config(&b.node_token, None).await.status(),
        StatusCode::OK
    );
    // Served once, an agent waits its turn like anyone again.
    assert_eq!(
        app.get_config(&a.node_token, None).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
}
