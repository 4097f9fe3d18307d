//! Bad agent requests are refused with the right status and a message naming what to fix:
//! 401 for credentials, 400 for malformed bodies, 413 over the size limit. Never a 500.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{bad_request_message, TestApp, ENROLLMENT_TOKEN};

#[tokio::test]
async fn config_and_heartbeat_refuse_a_missing_or_wrong_bearer_token_with_401() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let wrong = "Bearer vfn_0000000000000000000000000000000000000000";
    let basic = format!("Basic {}", node.node_token);
    let routes = [
        (Method::GET, "/api/agent/config"),
        (Method::POST, "/api/agent/config"),
        (Method::POST, "/api/agent/heartbeat"),
    ];
    for (method, path) in &routes {
        for auth in [None, Some(wrong), Some(basic.as_str()), Some("Bearer ")] {
            let resp = app
                .call_with_auth(method.clone(), path, auth, r#"{"pipelines": []}"#)
                .await;
            assert_eq!(
                resp.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {auth:?}"
            );
        }
    }
    // The right token on the same routes is accepted, so the 401s above are about the token.
    let good = format!("Bearer {}", node.node_token);
    for (method, path) in &routes {
        let resp = app
            .call_with_auth(method.clone(), path, Some(&good), r#"{"pipelines": []}"#)
            .await;
        assert_eq!(resp.status(), StatusCode::OK, "{method} {path}");
    }
}

#[tokio::test]
async fn enrollment_with_a_wrong_token_is_refused_with_401_and_creates_no_node() {
    let app = TestApp::spawn().await;

    let resp = app
        .post_enroll(json!({ "token": "vfe_not-the-token-at-all", "hostname": "h" }).to_string())
        .await;

    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");
    let nodes = vf_control::fleet::list_nodes(&app.control.db, &app.env_id)
        .await
        .unwrap();
    assert!(nodes.is_empty());
}

#[tokio::test]
async fn a_body_that_is_not_json_is_refused_with_400_on_every_agent_route() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;

    let enroll = app.post_enroll("hostname=edge-2").await;
    let config = app.post_config(&node.node_token, "{not json").await;
    let heartbeat = app.post_heartbeat(&node.node_token, "[1, 2").await;

    for resp in [enroll, config, heartbeat] {
        let message = bad_request_message(resp).await;
        assert!(!message.is_empty());
    }
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_refused_naming_its_path() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;
    let body = json!({ "pipelines": [{
        "pipelineId": pipeline.id, "version": "one", "status": "RUNNING"
    }]})
    .to_string();

    let heartbeat = app.post_heartbeat(&node.node_token, body.clone()).await;
    let config = app.post_config(&node.node_token, body).await;

    for resp in [heartbeat, config] {
        let message = bad_request_message(resp).await;
        assert!(message.contains("pipelines[0].version"), "{message}");
    }
    assert!(app.node_view(&node.node_id).await.pipelines.is_empty());
}

#[tokio::test]
async fn an_enrollment_without_a_hostname_is_refused_naming_the_field() {
    let app = TestApp::spawn().await;

    let resp = app
        .post_enroll(json!({ "token": ENROLLMENT_TOKEN, "os": "linux" }).to_string())
        .await;

    let message = bad_request_message(resp).await;
    assert!(message.contains("hostname"), "{message}");
}

/// A negative counter is the right type and an unusable value: ignored for that field (it
/// keeps what it had), never a refusal of the heartbeat (SPEC section 4).
#[tokio::test]
async fn a_negative_counter_is_ignored_and_the_rest_of_the_heartbeat_recorded() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;
    let body = json!({ "pipelines": [
        { "pipelineId": pipeline.id, "version": 1, "status": "RUNNING", "eventsIn": 10 },
        { "pipelineId": pipeline.id, "version": 1, "status": "RUNNING", "eventsIn": -5,
          "errorsTotal": 2 }
    ]});
    let resp = app.post_heartbeat(&node.node_token, body.to_string()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let first_only = json!({ "pipelines": [
        { "pipelineId": pipeline.id, "version": 1, "status": "RUNNING", "eventsIn": -1 }
    ]});
    let resp = app
        .post_config(&node.node_token, first_only.to_string())
        .await;
    assert_eq!(resp.status(), StatusCode::OK);

    let stored = &app.node_view(&node.node_id).await.pipelines[0];
    assert_eq!((stored.events_in, stored.errors_total), (10, 0));
    let minutes = app.minutes(&pipeline.id).await;
    assert_eq!((minutes[0].events_in, minutes[0].errors), (10, 2));
}

#[tokio::test]
async fn a_body_over_the_size_limit_is_refused_with_413() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let padding = "x".repeat(2 * 1024 * 1024);
    let heartbeat = json!({ "pipelines": [], "hostMetrics": { "padding": padding } }).to_string();
    let enroll = json!({ "token": ENROLLMENT_TOKEN, "hostname": padding }).to_string();

    let resp = app
        .post_heartbeat(&node.node_token, heartbeat.clone())
        .await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let resp = app.post_config(&node.node_token, heartbeat).await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let resp = app.post_enroll(enroll).await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);

    // The server is still serving, and nothing of the refused heartbeats was stored.
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    assert_eq!(app.node_view(&node.node_id).await.node.last_seen_at, None);
}

/// Text an agent sends with a NUL byte. PostgreSQL cannot store NUL in TEXT, so this is
/// where a 500 would leak out: facts about the agent are refused naming the field, while
/// per-pipeline text (status, checksum, process output) is kept without the NUL.
async fn nul_bytes_in_agent_text_are_refused_or_dropped_never_a_server_error(app: TestApp) {
    let pipeline = app.create_pipeline("logs", &[]).await;
    let enroll = app
        .post_enroll(json!({ "token": ENROLLMENT_TOKEN, "hostname": "edge\u{0}1" }).to_string())
        .await;
    let message = bad_request_message(enroll).await;
    assert!(message.starts_with("hostname:"), "{message}");
    let enroll = app
        .post_enroll(
            json!({ "token": ENROLLMENT_TOKEN, "hostname": "edge-1", "os": "linux\u{0}" })
                .to_string(),
        )
        .await;
    let message = bad_request_message(enroll).await;
    assert!(message.starts_with("os:"), "{message}");
    let node = app.enroll("edge-1", &[]).await;

    let facts = json!({ "pipelines": [], "agentVersion": "2.0\u{0}" }).to_string();
    let message =
        bad_request_message(app.post_heartbeat(&node.node_token, facts.clone()).await).await;
    assert!(message.starts_with("agentVersion:"), "{message}");
    let message = bad_request_message(app.post_config(&node.node_token, facts).await).await;
    assert!(message.starts_with("agentVersion:"), "{message}");

    let report = json!({ "pipelines": [{
        "pipelineId": pipeline.id, "version": 1, "status": "RUN\u{0}NING",
        "configChecksum": "ab\u{0}cd", "recentLogs": ["line\u{0}one"]
    }]})
    .to_string();
    let resp = app.post_heartbeat(&node.node_token, report.clone()).await;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "{}",
        resp.text().await.unwrap()
    );
    let resp = app.post_config(&node.node_token, report).await;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "{}",
        resp.text().await.unwrap()
    );
    let stored = &app.node_view(&node.node_id).await.pipelines[0];
    assert_eq!(stored.status, "RUNNING");
    assert_eq!(stored.config_checksum.as_deref(), Some("abcd"));
}

#[tokio::test]
async fn nul_bytes_in_agent_text_are_refused_or_dropped_on_sqlite() {
    nul_bytes_in_agent_text_are_refused_or_dropped_never_a_server_error(TestApp::spawn().await)
        .await;
}

#[tokio::test]
async fn nul_bytes_in_agent_text_are_refused_or_dropped_never_a_500_on_postgres() {
    nul_bytes_in_agent_text_are_refused_or_dropped_never_a_server_error(
        TestApp::spawn_postgres().await,
    )
    .await;
}
