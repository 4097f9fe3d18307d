//! The live agent channel: the push stream tells exactly the nodes whose served config
//! changed, and the logs, samples and tap-events routes take what agents ship (200 to a
//! valid body, 400 naming the field, 401 to a bad token, 413 over the size limit).

use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use reqwest::StatusCode;
use serde_json::{json, Value};
use vf_control::channel;

use crate::helpers::{bad_request_message, TestApp};

/// An open push stream, read message by message.
pub(crate) struct PushStream {
    pub(crate) resp: reqwest::Response,
    pub(crate) pending: String,
}

impl PushStream {
    pub(crate) async fn open(app: &TestApp, node_token: &str) -> PushStream {
        let resp = app
            .client
            .get(format!("{}/api/agent/push", app.url))
            .bearer_auth(node_token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[CONTENT_TYPE], "text/event-stream");
        PushStream {
            resp,
            pending: String::new(),
        }
    }

    /// The next message's JSON (`data:` line) within `wait`; `None` when nothing came or the
    /// stream ended.
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) {
                    return Some(serde_json::from_str(data).unwrap());
                }
                continue;
            }
            match tokio::time::timeout_at(deadline, self.resp.chunk()).await {
                Ok(Ok(Some(bytes))) => self.pending.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// Whether the server ended the stream within `wait`.
    async fn ended(&mut self, wait: Duration) -> bool {
        matches!(
            tokio::time::timeout(wait, self.resp.chunk()).await,
            Ok(Ok(None)) | Ok(Err(_))
        )
    }
}

pub(crate) const SOON: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_deploy_is_pushed_to_exactly_the_nodes_it_changes() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[("tier", "edge")]).await;
    app.deploy(&pipeline.id, "sources: {}\n# v1\n").await;
    let edge = app.enroll("edge-1", &[("tier", "edge")]).await;
    let db = app.enroll("db-1", &[("tier", "db")]).await;
    let mut to_edge = PushStream::open(&app, &edge.node_token).await;
    let mut to_db = PushStream::open(&app, &db.node_token).await;

    app.deploy(&pipeline.id, "sources: {}\n# v2\n").await;
    let message = to_edge.next(SOON).await.expect("the edge node hears of v2");
    assert_eq!(
        message,
        json!({"type": "config_changed", "pipelineId": pipeline.id, "reason": "now served v2 (was v1)"})
    );
    assert_eq!(
        to_db.next(Duration::from_secs(1)).await,
        None,
        "a node the pipeline does not select hears nothing"
    );

    // A label change that selects the other node: it hears of the pipeline it now gets.
    app.call_ok(
        "fleet.node.labels",
        json!({"node_id": db.node_id, "labels": {"tier": "edge"}}),
    )
    .await;
    let message = to_db.next(SOON).await.expect("the relabelled node hears");
    assert_eq!(message["pipelineId"], pipeline.id);
    assert_eq!(message["reason"], "now served v2");
    assert_eq!(to_edge.next(Duration::from_secs(1)).await, None);
}

#[tokio::test]
async fn a_revoked_nodes_push_stream_ends() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "sources: {}\n").await;
    let node = app.enroll("edge-1", &[]).await;
    let mut stream = PushStream::open(&app, &node.node_token).await;
    app.call_ok("fleet.node.revoke", json!({"node_id": node.node_id}))
        .await;
    assert!(stream.ended(SOON).await, "the stream closes on revocation");
}

#[tokio::test]
async fn push_streams_are_counted_on_metrics_by_route_and_outcome() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "sources: {}\n").await;
    let kept = app.enroll("edge-1", &[]).await;
    let revoked = app.enroll("edge-2", &[]).await;
    let _kept = PushStream::open(&app, &kept.node_token).await;
    let mut ending = PushStream::open(&app, &revoked.node_token).await;
    let refused = app
        .client
        .get(format!("{}/api/agent/push", app.url))
        .bearer_auth("vfn_not-a-node-token")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    for line in [
        "vectorflow_push_streams_connected 2",
        "vectorflow_push_connections_total{outcome=\"opened\"} 2",
        "vectorflow_agent_requests_total{route=\"/api/agent/push\",status=\"200\"} 2",
        "vectorflow_agent_requests_total{route=\"/api/agent/push\",status=\"401\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }

    app.call_ok("fleet.node.revoke", json!({"node_id": revoked.node_id}))
        .await;
    assert!(ending.ended(SOON).await, "the revoked node's stream ends");
    let metrics = app.get("/metrics").await.text().await.unwrap();
    for line in [
        "vectorflow_push_streams_connected 1",
        "vectorflow_push_connections_total{outcome=\"revoked\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
}

#[tokio::test]
async fn the_config_document_names_the_push_url() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let config: Value = app
        .get_config(&node.node_token, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(config["pushUrl"], format!("{}/api/agent/push", app.url));
}

/// A route of the channel and a valid body for it.
const ROUTES: [(&str, &str); 4] = [
    (
        "/api/agent/logs",
        r#"[{"pipelineId":"p","lines":["hello"]}]"#,
    ),
    (
        "/api/agent/samples",
        r#"{"results":[{"requestId":"r","componentKey":"in","events":[{"message":"hi"}],"schema":[{"path":".message","type":"string","sample":"hi"}]}]}"#,
    ),
    (
        "/api/agent/tap-events",
        r#"{"requestId":"r","pipelineId":"p","componentId":"in","events":[{"message":"hi"}]}"#,
    ),
    (
        "/api/agent/heartbeat",
        r#"{"pipelines":[],"agentHealth":{"pollErrorsTotal":1,"pushConnected":true},"deploymentMode":"STANDALONE","runningAs":"vector","sampleResults":[{"requestId":"r","componentKey":"in","error":"no events"}]}"#,
    ),
];

pub(crate) async fn post(
    app: &TestApp,
    path: &str,
    token: Option<&str>,
    body: String,
) -> reqwest::Response {
    let mut req = app
        .client
        .post(format!("{}{path}", app.url))
        .header(CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn every_channel_route_takes_a_valid_body_and_refuses_bad_ones_by_name() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let token = Some(node.node_token.as_str());
    for (path, body) in ROUTES {
        let resp = post(&app, path, token, body.to_string()).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_eq!(resp.json::<Value>().await.unwrap(), json!({"ok": true}));

        let wrong = post(&app, path, Some("vfn_not-a-token"), body.to_string()).await;
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "{path}");
        let none = post(&app, path, None, body.to_string()).await;
        assert_eq!(none.status(), StatusCode::UNAUTHORIZED, "{path}");

        let huge = format!("[\"{}\"]", "x".repeat(2 * 1024 * 1024));
        let oversized = post(&app, path, token, huge).await;
        assert_eq!(oversized.status(), StatusCode::PAYLOAD_TOO_LARGE, "{path}");
    }
    let malformed = [
        (
            "/api/agent/logs",
            r#"[{"pipelineId":"p","lines":"hello"}]"#,
            "[0].lines",
        ),
        (
            "/api/agent/logs",
            r#"[{"pipelineId":"","lines":[]}]"#,
            "[0].pipelineId",
        ),
        (
            "/api/agent/samples",
            r#"{"results":[{"requestId":"r"}]}"#,
            "componentKey",
        ),
        ("/api/agent/samples", r#"{"results":{}}"#, "results"),
        (
            "/api/agent/tap-events",
            r#"{"requestId":"r","pipelineId":"p"}"#,
            "componentId",
        ),
        (
            "/api/agent/tap-events",
            r#"{"requestId":"r","pipelineId":"p","componentId":"in","events":3}"#,
            "events",
        ),
        (
            "/api/agent/heartbeat",
            r#"{"agentHealth":{"pushConnected":"yes"}}"#,
            "agentHealth.pushConnected",
        ),
        (
            "/api/agent/heartbeat",
            r#"{"sampleResults":[{"requestId":"","componentKey":"in"}]}"#,
            "sampleResults[0].requestId",
        ),
    ];
    for (path, body, field) in malformed {
        let resp = post(&app, path, token, body.to_string()).await;
        let message = bad_request_message(resp).await;
        assert!(message.contains(field), "{path} {body}: {message}");
    }
}

#[tokio::test]
async fn logs_keep_the_newest_thousand_lines_per_pipeline_each_cut_at_4_kib() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let token = Some(node.node_token.as_str());
    let first: Vec<String> = (0..700).map(|i| format!("line {i}")).collect();
    let then: Vec<String> = (700..1200).map(|i| format!("line {i}")).collect();
    for lines in [first, then] {
        let body =
            json!([{"pipelineId": "p", "lines": lines}, {"pipelineId": "q", "lines": ["other"]}]);
        let resp = post(&app, "/api/agent/logs", token, body.to_string()).await;
        assert_eq!(resp.status(), StatusCode::OK);
    }
    let long = "é".repeat(4000);
    let body = json!([{"pipelineId": "q", "lines": [long]}]);
    assert_eq!(
        post(&app, "/api/agent/logs", token, body.to_string())
            .await
            .status(),
        StatusCode::OK
    );

    let p = channel::recent_logs(&app.control.db, &node.node_id, Some("p"), 5_000)
        .await
        .unwrap();
    assert_eq!(p.len(), 1_000, "older lines dropped first");
    assert_eq!(p[0].line, "line 200");
    assert_eq!(p[999].line, "line 1199");
    let q = channel::recent_logs(&app.control.db, &node.node_id, Some("q"), 5_000)
        .await
        .unwrap();
    assert_eq!(q.len(), 3, "each pipeline has its own thousand");
    assert_eq!(q[2].line.len(), 4096, "cut at 4 KiB");
}

#[tokio::test]
async fn sample_answers_are_kept_per_request_and_component() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let token = Some(node.node_token.as_str());
    for (path, body) in &ROUTES[1..2] {
        assert_eq!(
            post(&app, path, token, body.to_string()).await.status(),
            StatusCode::OK
        );
    }
    let results = channel::sample_results(&app.control.db, &node.node_id, "r")
        .await
        .unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].events, Some(vec![json!({"message": "hi"})]));
    assert_eq!(results[0].schema.as_ref().unwrap()[0].kind, "string");
    // A heartbeat's sampleResults answer the same way; a later answer replaces the earlier.
    let (path, body) = ROUTES[3];
    assert_eq!(
        post(&app, path, token, body.to_string()).await.status(),
        StatusCode::OK
    );
    let results = channel::sample_results(&app.control.db, &node.node_id, "r")
        .await
        .unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].error.as_deref(), Some("no events"));
}

#[tokio::test]
async fn a_change_committed_through_one_replica_is_pushed_by_another_on_postgres() {
    let app = TestApp::spawn_postgres().await;
    // A second server on the same database: what another replica behind the load balancer is.
    let replica = vf_server::build_with_clock(
        crate::helpers::test_config(&app.db.url),
        std::sync::Arc::new(app.clock.clone()),
    )
    .await
    .expect("a second replica starts on the same database");
    let replica_url = replica.spawn();

    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "sources: {}\n# v1\n").await;
    let node = app.enroll("edge-1", &[]).await;
    let resp = app
        .client
        .get(format!("{replica_url}/api/agent/push"))
        .bearer_auth(&node.node_token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut on_replica = PushStream {
        resp,
        pending: String::new(),
    };

    // Deployed through the first server; the agent is connected to the second.
    app.deploy(&pipeline.id, "sources: {}\n# v2\n").await;
    let message = on_replica
        .next(SOON)
        .await
        .expect("the other replica pushes");
    assert_eq!(message["type"], "config_changed");
    assert_eq!(message["pipelineId"], pipeline.id);
    assert_eq!(message["reason"], "now served v2 (was v1)");

    // An operator's sample request made through the first server reaches it too.
    let request = app
        .call_ok(
            "node.sample",
            json!({"node_id": node.node_id, "pipeline_id": pipeline.id, "component_keys": ["in"]}),
        )
        .await;
    let message = on_replica.next(SOON).await.expect("the request is pushed");
    assert_eq!(message["type"], "sample_request");
    assert_eq!(message["requestId"], request);
}

/// Polls `check` every 50 ms for up to 10 s.
pub(crate) async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn a_running_agent_applies_a_new_version_at_once_through_push_and_one_without_push_waits() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "v: 1\n").await;
    let slow = Duration::from_secs(3600);
    let start = |hostname: &str, push: bool| {
        let options = vf_agent::AgentOptions {
            poll_interval_override: Some(slow),
            push,
            ..app.agent_options(hostname, &[])
        };
        async move {
            vf_agent::Agent::start(options)
                .await
                .expect("agent enrolls")
        }
    };
    let pushed = start("pushed", true).await;
    let polling = start("polling", false).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    for agent in [pushed, polling] {
        let mut stopped = stopped.clone();
        tokio::spawn(agent.run(async move {
            let _ = stopped.changed().await;
        }));
    }
    let file =
        |hostname: &str| std::fs::read_to_string(app.pipeline_file(hostname, &pipeline.id)).ok();
    eventually("both agents to run v1", || {
        file("pushed").as_deref() == Some("v: 1\n") && file("polling").as_deref() == Some("v: 1\n")
    })
    .await;
    eventually("the pushed agent's stream to open", || {
        app.control.push.connected() == 1
    })
    .await;

    app.deploy(&pipeline.id, "v: 2\n").await;
    eventually("the pushed agent to run v2", || {
        file("pushed").as_deref() == Some("v: 2\n")
    })
    .await;
    assert_eq!(
        file("polling").as_deref(),
        Some("v: 1\n"),
        "without push the change waits for the next poll (an hour away)"
    );
    let _ = stop.send(true);
}

#[tokio::test]
async fn heartbeat_recent_logs_join_the_store_once_however_often_they_are_repeated() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let token = Some(node.node_token.as_str());
    let heartbeat = |lines: &[&str]| {
        json!({"pipelines": [{"pipelineId": "p", "version": 1, "status": "CRASHED", "recentLogs": lines}]})
            .to_string()
    };
    let crashed = ["error: sink out is unreachable", "exited with code 78"];
    for _ in 0..3 {
        let resp = post(&app, "/api/agent/heartbeat", token, heartbeat(&crashed)).await;
        assert_eq!(resp.status(), StatusCode::OK);
    }
    // The config route's heartbeat body counts the same.
    let resp = post(&app, "/api/agent/config", token, heartbeat(&crashed)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let lines = |logs: Vec<channel::LogLine>| logs.into_iter().map(|l| l.line).collect::<Vec<_>>();
    let stored = channel::recent_logs(&app.control.db, &node.node_id, Some("p"), 100)
        .await
        .unwrap();
    assert_eq!(lines(stored), crashed, "repeated lines are kept once");

    let again = ["error: sink out is unreachable", "exited with code 1"];
    post(&app, "/api/agent/heartbeat", token, heartbeat(&again)).await;
    let stored = channel::recent_logs(&app.control.db, &node.node_id, Some("p"), 100)
        .await
        .unwrap();
    assert_eq!(stored.len(), 4, "a new crash's lines are added");
}

#[tokio::test]
async fn a_nodes_page_shows_what_its_agent_reported_of_the_host_itself_and_its_logs() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "sources: {}\n").await;
    let node = app.enroll("edge-1", &[("zone", "eu")]).await;
    let token = Some(node.node_token.as_str());
    let heartbeat = json!({
        "pipelines": [{"pipelineId": pipeline.id, "version": 1, "status": "RUNNING", "eventsIn": 42,
                       "componentMetrics": [{"componentId": "in", "componentKind": "source",
                                             "receivedEvents": 42, "sentEvents": 42}]}],
        "hostMetrics": {"memoryUsedBytes": 1024},
        "agentHealth": {"pushConnected": true, "pollErrorsTotal": 0},
        "runningAs": "vector",
    });
    assert_eq!(
        post(&app, "/api/agent/heartbeat", token, heartbeat.to_string())
            .await
            .status(),
        StatusCode::OK
    );
    let logs = json!([{"pipelineId": pipeline.id, "lines": ["started", "listening on :9000"]}]);
    assert_eq!(
        post(&app, "/api/agent/logs", token, logs.to_string())
            .await
            .status(),
        StatusCode::OK
    );

    let page = app
        .call_ok("node.get", json!({"node_id": node.node_id}))
        .await;
    assert_eq!(page["node"]["name"], "edge-1");
    assert_eq!(page["node"]["labels"]["zone"], "eu");
    assert_eq!(page["node"]["pipelines"][0]["pipeline_name"], "logs");
    assert_eq!(page["node"]["pipelines"][0]["events_in"], 42);
    assert_eq!(page["host_metrics"], json!([["memoryUsedBytes", "1024"]]));
    assert_eq!(
        page["component_metrics"][&pipeline.id],
        json!([
            ["in.componentKind", "source"],
            ["in.receivedEvents", "42"],
            ["in.sentEvents", "42"]
        ])
    );
    assert_eq!(page["history"][0][2], "node.enroll", "its history: {page}");
    assert!(page["agent_health"]
        .as_array()
        .unwrap()
        .contains(&json!(["agentHealth.pushConnected", "true"])));
    assert!(page["agent_health"]
        .as_array()
        .unwrap()
        .contains(&json!(["runningAs", "vector"])));
    let lines: Vec<&str> = page["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[2].as_str().unwrap())
        .collect();
    assert_eq!(lines, ["started", "listening on :9000"]);
    assert_eq!(page["logs"][0][0], "logs", "named by pipeline");

    let (status, _) = app
        .call("node.get", json!({"node_id": "no-such-node"}))
        .await;
    assert_eq!(status, 404);
}
