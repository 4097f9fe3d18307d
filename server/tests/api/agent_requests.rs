//! What operators ask of one node over the live channel (sample events, tap a component,
//! restart a pipeline): the request reaches the node by push and, for samples, in its config
//! document; the answers show through the server functions; bad requests are refused by name.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::agent_channel::{eventually, post, PushStream, SOON};
use crate::helpers::{etag, LogCapture, TestApp};

const CONFIG: &str =
    "sources:\n  in: {type: stdin}\nsinks:\n  out: {type: console, inputs: [in]}\n";

#[tokio::test]
async fn a_sample_request_goes_out_by_push_and_in_the_config_document_and_its_answer_shows() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, CONFIG).await;
    let node = app.enroll("edge-1", &[]).await;
    let before = app.get_config(&node.node_token, None).await;
    let before_etag = etag(&before);
    let document: Value = before.json().await.unwrap();
    assert_eq!(document.get("sampleRequests"), None, "nothing pending");
    let mut stream = PushStream::open(&app, &node.node_token).await;

    let request = app
        .call_ok(
            "node.sample",
            json!({"node_id": node.node_id, "pipeline_id": pipeline.id,
                   "component_keys": ["in", "out"], "limit": 5}),
        )
        .await;
    let request = request.as_str().expect("a request id").to_owned();
    assert_eq!(
        stream.next(SOON).await.expect("pushed"),
        json!({"type": "sample_request", "requestId": request, "pipelineId": pipeline.id,
               "componentKeys": ["in", "out"], "limit": 5})
    );
    // An agent without push finds it in its next config document: not a 304.
    let resp = app.get_config(&node.node_token, Some(&before_etag)).await;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "the pending request changes the document"
    );
    let document: Value = resp.json().await.unwrap();
    assert_eq!(
        document["sampleRequests"],
        json!([{"requestId": request, "pipelineId": pipeline.id,
                "componentKeys": ["in", "out"], "limit": 5}])
    );

    let waiting = app
        .call_ok(
            "node.sample.results",
            json!({"node_id": node.node_id, "request_id": request}),
        )
        .await;
    assert_eq!(waiting["results"], json!([]));
    assert_eq!(waiting["expires_at"], app.now() + 30_000);

    let answer = json!({"results": [{
        "requestId": request, "componentKey": "in",
        "events": [{"message": "hello", "n": 1}],
        "schema": [{"path": ".message", "type": "string", "sample": "hello"},
                   {"path": ".n", "type": "integer", "sample": 1}],
    }]});
    let token = Some(node.node_token.as_str());
    let resp = post(&app, "/api/agent/samples", token, answer.to_string()).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let answered = app
        .call_ok(
            "node.sample.results",
            json!({"node_id": node.node_id, "request_id": request}),
        )
        .await;
    let result = &answered["results"][0];
    assert_eq!(result["component_key"], "in");
    let event: Value = serde_json::from_str(result["events"][0].as_str().unwrap()).unwrap();
    assert_eq!(event, json!({"message": "hello", "n": 1}));
    assert_eq!(
        result["schema"],
        json!([[".message", "string", "hello"], [".n", "integer", "1"]])
    );

    // After 30 s the request is no longer pending.
    app.clock.advance_ms(30_001);
    let document: Value = app
        .get_config(&node.node_token, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(document.get("sampleRequests"), None);

    // The node page offers the components of the version the node runs.
    let report =
        json!({"pipelines": [{"pipelineId": pipeline.id, "version": 1, "status": "RUNNING"}]});
    post(&app, "/api/agent/heartbeat", token, report.to_string()).await;
    let page = app
        .call_ok("node.get", json!({"node_id": node.node_id}))
        .await;
    assert_eq!(page["live"], true);
    assert_eq!(
        page["components"][&pipeline.id],
        json!([{"kind": "sources", "key": "in"}, {"kind": "sinks", "key": "out"}])
    );
}

#[tokio::test]
async fn requests_to_a_node_are_refused_by_name_when_they_cannot_be_made() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, CONFIG).await;
    let node = app.enroll("edge-1", &[]).await;
    let sample = |keys: Value, limit: Value| {
        json!({"node_id": node.node_id, "pipeline_id": pipeline.id,
               "component_keys": keys, "limit": limit})
    };
    let refused = app
        .call_refused("node.sample", sample(json!([]), json!(5)), 400)
        .await;
    assert!(refused.contains("componentKeys"), "{refused}");
    let refused = app
        .call_refused("node.sample", sample(json!(["in", " "]), json!(5)), 400)
        .await;
    assert!(refused.contains("componentKeys[1]"), "{refused}");
    let refused = app
        .call_refused("node.sample", sample(json!(["in"]), json!(0)), 400)
        .await;
    assert!(
        refused.contains("limit") && refused.contains("between 1 and 100"),
        "{refused}"
    );
    let refused = app
        .call_refused(
            "node.tap.start",
            json!({"node_id": node.node_id, "pipeline_id": "no-such-pipeline", "component_id": "in"}),
            404,
        )
        .await;
    assert!(refused.contains("no-such-pipeline"), "{refused}");
    app.call_refused(
        "node.tap.stop",
        json!({"node_id": node.node_id, "request_id": "no-such-tap"}),
        404,
    )
    .await;

    app.call_ok("fleet.node.revoke", json!({"node_id": node.node_id}))
        .await;
    let refused = app
        .call_refused(
            "node.restart",
            json!({"node_id": node.node_id, "pipeline_id": pipeline.id}),
            409,
        )
        .await;
    assert!(refused.contains("revoked"), "{refused}");
}

/// Calls `endpoint` every 100 ms until `done` holds for its answer (at most 10 s).
async fn until(app: &TestApp, endpoint: &str, body: Value, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        let answer = app.call_ok(endpoint, body.clone()).await;
        if done(&answer) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{endpoint} never answered as expected");
}

#[tokio::test]
async fn a_simulated_agent_answers_samples_and_taps_restarts_and_ships_its_log() {
    let logs = LogCapture::start();
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, CONFIG).await;
    let agent = app.start_simulated_agent("sim-1", &[]).await;
    let node_id = agent.node_id().to_owned();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(agent.run(async move {
        let _ = stopped.changed().await;
    }));
    eventually("the agent's push stream to open", || {
        app.control.push.connected() == 1
    })
    .await;

    let request = app
        .call_ok(
            "node.sample",
            json!({"node_id": node_id, "pipeline_id": pipeline.id,
                   "component_keys": ["in", "out"], "limit": 4}),
        )
        .await;
    let answered = until(
        &app,
        "node.sample.results",
        json!({"node_id": node_id, "request_id": request}),
        |a| a["results"].as_array().is_some_and(|r| r.len() == 2),
    )
    .await;
    let first = &answered["results"][0];
    assert_eq!(first["events"].as_array().unwrap().len(), 4);
    let event: Value = serde_json::from_str(first["events"][0].as_str().unwrap()).unwrap();
    assert_eq!(event["host"], "sim-1");
    let message = event["message"].as_str().unwrap().to_owned();
    assert!(first["schema"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f[0] == ".message" && f[1] == "string"));

    let tap = app
        .call_ok(
            "node.tap.start",
            json!({"node_id": node_id, "pipeline_id": pipeline.id, "component_id": "in"}),
        )
        .await;
    let tapped = until(
        &app,
        "node.tap.events",
        json!({"node_id": node_id, "request_id": tap}),
        |a| a["events"].as_array().is_some_and(|e| e.len() >= 3),
    )
    .await;
    let event: Value = serde_json::from_str(tapped["events"][0][2].as_str().unwrap()).unwrap();
    assert_eq!(event["component"], "in");
    app.call_ok(
        "node.tap.stop",
        json!({"node_id": node_id, "request_id": tap}),
    )
    .await;
    until(
        &app,
        "node.tap.events",
        json!({"node_id": node_id, "request_id": tap, "after": tapped["last"]}),
        |a| a["ended"] == "stopped: stopped by the operator",
    )
    .await;

    app.call_ok(
        "node.restart",
        json!({"node_id": node_id, "pipeline_id": pipeline.id}),
    )
    .await;
    let page = until(&app, "node.get", json!({"node_id": node_id}), |p| {
        p["logs"]
            .as_array()
            .is_some_and(|l| l.iter().any(|l| l[2] == "restarted by an operator"))
    })
    .await;
    let lines: Vec<&str> = page["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[2].as_str().unwrap())
        .collect();
    assert!(lines.contains(&"v1 started (simulated)"), "{lines:?}");

    let _ = stop.send(true);
    running.await.unwrap();
    let text = logs.text();
    assert!(
        text.contains("answering a sample request"),
        "the agent logged it"
    );
    assert!(
        !text.contains(&message),
        "no sampled or tapped event reaches any log"
    );
}

#[tokio::test]
async fn an_agent_running_a_command_ships_its_output_and_says_it_cannot_sample() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, CONFIG).await;
    let options = vf_agent::AgentOptions {
        command: Some("echo listening on :9000; exec sleep 60".into()),
        ..app.agent_options("cmd-1", &[])
    };
    let mut agent = vf_agent::Agent::start(options).await.expect("enrolls");
    let node_id = agent.node_id().to_owned();
    let request = app
        .call_ok(
            "node.sample",
            json!({"node_id": node_id, "pipeline_id": pipeline.id, "component_keys": ["in"]}),
        )
        .await;
    // Polls until the process's output went out (it is shipped after each poll); the first
    // poll also finds the sample request in the config document.
    let mut shipped = false;
    for _ in 0..50 {
        agent.poll_once().await.expect("polls");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let page = app.call_ok("node.get", json!({"node_id": node_id})).await;
        let lines: Vec<String> = page["logs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l[2].as_str().unwrap().to_owned())
            .collect();
        if lines.contains(&"listening on :9000".to_owned()) {
            assert_eq!(lines[0], "v1 started", "the agent's own line comes first");
            shipped = true;
            break;
        }
    }
    assert!(shipped, "the command's output reached the node's log");
    let answered = until(
        &app,
        "node.sample.results",
        json!({"node_id": node_id, "request_id": request}),
        |a| a["results"].as_array().is_some_and(|r| r.len() == 1),
    )
    .await;
    let error = answered["results"][0]["error"].as_str().unwrap();
    assert!(error.contains("cannot sample"), "{error}");
    agent.stop_all().await;
}
