//! The vf-agent routes against the protocol's own field list (SPEC section 4, docs/agent.md
//! "Types"), not against our agent's structs: every body here is written by hand as the
//! protocol's reference agent may send it. Numbers are JSON numbers (fractions, exponents);
//! optional fields may be absent or null; unknown fields are ignored; a value that cannot be
//! used is ignored for its field and counted; a wrong shape is a 400 naming the field.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::agent_channel::post;
use crate::helpers::{bad_request_message, TestApp, ENROLLMENT_TOKEN};

/// A node of a fresh app with one deployed pipeline.
struct Fixture {
    app: TestApp,
    pipeline_id: String,
    node_id: String,
    token: String,
}

async fn fixture() -> Fixture {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "sources: {}\n").await;
    let node = app.enroll("edge-1", &[]).await;
    Fixture {
        app,
        pipeline_id: pipeline.id,
        node_id: node.node_id,
        token: node.node_token,
    }
}

impl Fixture {
    async fn send(&self, path: &str, body: &str) -> reqwest::Response {
        post(&self.app, path, Some(&self.token), body.to_string()).await
    }

    async fn taken(&self, path: &str, body: &str) {
        let resp = self.send(path, body).await;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        assert_eq!(status, StatusCode::OK, "{path} {body}: {text}");
    }

    async fn node_page(&self) -> Value {
        self.app
            .call_ok("node.get", json!({ "node_id": self.node_id }))
            .await
    }

    async fn metrics(&self) -> String {
        self.app.get("/metrics").await.text().await.unwrap()
    }
}

/// `(field, value)` pairs of a node page section, as strings.
fn fields(section: &Value) -> Vec<(String, String)> {
    section
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap_or_default().to_string(),
                pair[1].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn has(section: &Value, field: &str, value: &str) -> bool {
    fields(section).contains(&(field.to_string(), value.to_string()))
}

#[tokio::test]
async fn every_route_takes_a_body_with_every_optional_field_absent() {
    let f = fixture().await;
    let p = &f.pipeline_id;
    let enroll = json!({"token": ENROLLMENT_TOKEN, "hostname": "edge-2"});
    assert_eq!(
        f.app.post_enroll(enroll.to_string()).await.status(),
        StatusCode::OK
    );
    let report =
        format!(r#"{{"pipelines": [{{"pipelineId": "{p}", "version": 1, "status": "RUNNING"}}]}}"#);
    f.taken("/api/agent/heartbeat", &report).await;
    f.taken("/api/agent/config", &report).await;
    f.taken("/api/agent/heartbeat", r#"{"pipelines": []}"#)
        .await;
    f.taken(
        "/api/agent/logs",
        &format!(r#"[{{"pipelineId": "{p}", "lines": []}}]"#),
    )
    .await;
    f.taken(
        "/api/agent/samples",
        r#"{"results": [{"requestId": "r1", "componentKey": "in"}]}"#,
    )
    .await;
    f.taken(
        "/api/agent/tap-events",
        &format!(r#"{{"requestId": "t1", "pipelineId": "{p}", "componentId": "in"}}"#),
    )
    .await;

    let view = f.app.node_view(&f.node_id).await;
    assert_eq!(view.status, vf_rules::NodeStatus::Healthy);
    assert_eq!(view.pipelines[0].version, Some(1));
    assert_eq!(view.pipelines[0].status, "RUNNING");
}

/// Every field of a heartbeat as the reference agent sends it: counters and gauges as
/// fractions and exponents, uptimes in fractional seconds.
fn full_heartbeat(pipeline_id: &str) -> String {
    json!({
        "pipelines": [{
            "pipelineId": pipeline_id, "version": 1, "status": "RUNNING",
            "pid": 4242, "uptimeSeconds": 3.75,
            "eventsIn": 1.5e3, "eventsOut": 1488.0, "errorsTotal": 12.0,
            "eventsDiscarded": 0.0, "bytesIn": 2.5e5, "bytesOut": 249999.6,
            "spansIn": 0.0, "spansOut": 0.0, "tracesIn": 0.0, "utilization": 0.25,
            "configChecksum": "sha256:abc",
            "recentLogs": ["started"],
            "componentMetrics": [{
                "componentId": "in", "componentKind": "source",
                "receivedEvents": 1.5e3, "sentEvents": 1500.0,
                "receivedBytes": 2.5e5, "sentBytes": 2.5e5,
                "errorsTotal": 0.0, "discardedEvents": 0.0, "latencyMeanSeconds": 2.5e-3
            }]
        }],
        "hostMetrics": {
            "memoryTotalBytes": 8.0e9, "memoryUsedBytes": 1.2e9, "memoryFreeBytes": 6.8e9,
            "cpuSecondsTotal": 1234.56, "cpuSecondsIdle": 1000.5,
            "loadAvg1": 0.42, "loadAvg5": 0.3, "loadAvg15": 0.25,
            "fsTotalBytes": 1e11, "fsUsedBytes": 4.2e10, "fsFreeBytes": 5.8e10,
            "diskReadBytes": 1.5e6, "diskWrittenBytes": 2.5e6,
            "netRxBytes": 3.5e6, "netTxBytes": 4.5e6
        },
        "agentVersion": "1.4.2",
        "vectorVersion": "0.54.0",
        "deploymentMode": "STANDALONE",
        "runningAs": "vector",
        "labels": {"zone": "eu"},
        "agentHealth": {
            "pollErrorsTotal": 0, "pushReconnectsTotal": 2.0, "heartbeatErrorsTotal": 1e0,
            "pushConnected": true, "pipelinesRunning": 1, "uptimeSeconds": 0.117464567
        }
    })
    .to_string()
}

#[tokio::test]
async fn a_heartbeat_with_every_field_in_fractions_and_exponents_is_read_back_everywhere() {
    for route in ["/api/agent/heartbeat", "/api/agent/config"] {
        let f = fixture().await;
        f.taken(route, &full_heartbeat(&f.pipeline_id)).await;

        // Node status, as the fleet views show it.
        let view = f.app.node_view(&f.node_id).await;
        assert_eq!(view.status, vf_rules::NodeStatus::Healthy, "{route}");
        let report = &view.pipelines[0];
        assert_eq!(
            (report.version, report.status.as_str()),
            (Some(1), "RUNNING")
        );
        assert_eq!((report.events_in, report.errors_total), (1500, 12));
        assert_eq!(view.node.agent_version.as_deref(), Some("1.4.2"));

        // Gate inputs: the per-minute counters errorRate and throughputDrop add.
        let minutes = f.app.minutes(&f.pipeline_id).await;
        assert_eq!(minutes.len(), 1, "{route}: {minutes:?}");
        assert_eq!((minutes[0].events_in, minutes[0].errors), (1500, 12));

        // The node page.
        let page = f.node_page().await;
        assert_eq!(page["node"]["pipelines"][0]["events_in"], 1500);
        assert!(has(&page["host_metrics"], "loadAvg1", "0.42"), "{page}");
        assert!(has(&page["host_metrics"], "memoryUsedBytes", "1200000000"));
        assert!(has(&page["host_metrics"], "netTxBytes", "4500000"));
        assert_eq!(fields(&page["host_metrics"]).len(), 15);
        let health = &page["agent_health"];
        assert!(
            has(health, "agentHealth.uptimeSeconds", "0.117464567"),
            "{health}"
        );
        assert!(has(health, "agentHealth.pushReconnectsTotal", "2"));
        assert!(has(health, "agentHealth.pipelinesRunning", "1"));
        assert!(has(health, "deploymentMode", "STANDALONE"));
        let components = &page["component_metrics"][&f.pipeline_id];
        assert!(has(components, "in.receivedEvents", "1500"), "{components}");
        assert!(has(components, "in.latencyMeanSeconds", "0.0025"));
        assert!(has(components, "in.componentKind", "source"));
    }
}

#[tokio::test]
async fn nulls_stand_for_absent_optional_fields() {
    let f = fixture().await;
    let body = json!({
        "pipelines": [{
            "pipelineId": f.pipeline_id, "version": 1, "status": "RUNNING",
            "pid": null, "uptimeSeconds": null, "eventsIn": 10, "errorsTotal": null,
            "recentLogs": null, "componentMetrics": null, "configChecksum": null,
            "failedVersion": null, "utilization": null
        }],
        "hostMetrics": null, "agentHealth": null, "sampleResults": null, "labels": null,
        "agentVersion": null, "deploymentMode": null, "updateError": null
    })
    .to_string();
    f.taken("/api/agent/heartbeat", &body).await;
    f.taken("/api/agent/config", &body).await;
    let report = &f.app.node_view(&f.node_id).await.pipelines[0];
    assert_eq!((report.events_in, report.errors_total), (10, 0));
    let health = json!({"pollErrorsTotal": null, "uptimeSeconds": 1.5, "pushConnected": null});
    f.taken(
        "/api/agent/heartbeat",
        &json!({"pipelines": [], "agentHealth": health, "hostMetrics": {"loadAvg1": null}})
            .to_string(),
    )
    .await;
    let page = f.node_page().await;
    assert!(has(
        &page["agent_health"],
        "agentHealth.uptimeSeconds",
        "1.5"
    ));
    f.taken(
        "/api/agent/samples",
        r#"{"results": [{"requestId": "r", "componentKey": "in", "events": null, "schema": null, "error": null}]}"#,
    )
    .await;
    f.taken(
        "/api/agent/tap-events",
        &format!(
            r#"{{"requestId": "t", "pipelineId": "{}", "componentId": "in", "events": null, "status": null, "reason": null}}"#,
            f.pipeline_id
        ),
    )
    .await;
}

#[tokio::test]
async fn unknown_fields_are_ignored_at_every_level() {
    let f = fixture().await;
    let p = &f.pipeline_id;
    let heartbeat = json!({
        "fromTheFuture": {"nested": [1, 2]},
        "pipelines": [{
            "pipelineId": p, "version": 1, "status": "RUNNING", "eventsIn": 5, "newCounter": 1.5,
            "componentMetrics": [{"componentId": "in", "componentKind": "source",
                "receivedEvents": 5, "sentEvents": 5, "p99LatencySeconds": 0.5}],
            "failedVersion": null
        }],
        "hostMetrics": {"loadAvg1": 0.5, "gpuTemperatureCelsius": 71.5},
        "agentHealth": {"uptimeSeconds": 2.5, "goroutines": 12},
        "secretBackendStatus": "ok"
    })
    .to_string();
    f.taken("/api/agent/heartbeat", &heartbeat).await;
    f.taken("/api/agent/config", &heartbeat).await;
    let page = f.node_page().await;
    assert_eq!(page["node"]["pipelines"][0]["events_in"], 5);
    assert_eq!(
        fields(&page["host_metrics"]),
        [("loadAvg1".into(), "0.5".into())]
    );
    f.taken(
        "/api/agent/logs",
        &format!(r#"[{{"pipelineId": "{p}", "lines": ["a"], "source": "stderr"}}]"#),
    )
    .await;
    f.taken(
        "/api/agent/samples",
        r#"{"results": [{"requestId": "r", "componentKey": "in", "truncated": true}], "agent": "x"}"#,
    )
    .await;
    f.taken(
        "/api/agent/tap-events",
        &format!(r#"{{"requestId": "t", "pipelineId": "{p}", "componentId": "in", "seq": 3}}"#),
    )
    .await;
    let enroll = json!({"token": ENROLLMENT_TOKEN, "hostname": "edge-9", "arch": "arm64"});
    assert_eq!(
        f.app.post_enroll(enroll.to_string()).await.status(),
        StatusCode::OK
    );
}

fn report_with(pipeline_id: &str, fields: &str) -> String {
    format!(
        r#"{{"pipelines": [{{"pipelineId": "{pipeline_id}", "version": 1, "status": "RUNNING", {fields}}}]}}"#
    )
}

#[tokio::test]
async fn values_that_cannot_be_used_are_ignored_for_their_field_warned_and_counted() {
    let f = fixture().await;
    let p = &f.pipeline_id;
    f.taken(
        "/api/agent/heartbeat",
        &report_with(p, r#""eventsIn": 100, "errorsTotal": 4"#),
    )
    .await;
    // A negative counter and one past what a counter holds: the rest of the heartbeat is
    // kept, and the unusable counters keep the value they had (no restart, no spike).
    let bad = format!(
        r#"{{"pipelines": [{{"pipelineId": "{p}", "version": 1, "status": "RUNNING",
            "eventsIn": -5, "errorsTotal": 1e19, "eventsOut": 90, "utilization": -0.5,
            "componentMetrics": [{{"componentId": "in", "componentKind": "source",
                "receivedEvents": -1, "sentEvents": 3}}]}}],
           "hostMetrics": {{"loadAvg1": -1, "loadAvg5": 0.5}},
           "agentHealth": {{"uptimeSeconds": -3, "pollErrorsTotal": 2}}}}"#
    );
    f.taken("/api/agent/heartbeat", &bad).await;
    f.taken(
        "/api/agent/heartbeat",
        &report_with(p, r#""eventsIn": 150, "errorsTotal": 5"#),
    )
    .await;

    let minutes = f.app.minutes(p).await;
    let (events, errors): (i64, i64) = minutes
        .iter()
        .fold((0, 0), |(e, r), m| (e + m.events_in, r + m.errors));
    assert_eq!((events, errors), (150, 5), "{minutes:?}");
    let page = f.node_page().await;
    assert_eq!(
        fields(&page["host_metrics"]),
        [("loadAvg5".into(), "0.5".into())]
    );
    assert!(has(
        &page["agent_health"],
        "agentHealth.pollErrorsTotal",
        "2"
    ));
    assert!(!fields(&page["agent_health"])
        .iter()
        .any(|(field, _)| field == "agentHealth.uptimeSeconds"));

    let metrics = f.metrics().await;
    for field in [
        "pipelines[].eventsIn",
        "pipelines[].errorsTotal",
        "pipelines[].utilization",
        "pipelines[].componentMetrics[].receivedEvents",
        "hostMetrics.loadAvg1",
        "agentHealth.uptimeSeconds",
    ] {
        let line = format!("vectorflow_agent_values_ignored_total{{field=\"{field}\"}} 1");
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    }
}

/// `(route, body, what the 400 must start with)`.
fn bad_shapes(p: &str) -> Vec<(&'static str, String, String)> {
    let hb = "/api/agent/heartbeat";
    let report = |fields: &str| report_with(p, fields);
    let component = |fields: &str| {
        report(&format!(
            r#""componentMetrics": [{{"componentId": "in", {fields}}}]"#
        ))
    };
    vec![
        (
            hb,
            "[]".into(),
            "body: invalid type: sequence, expected a JSON object".into(),
        ),
        (
            hb,
            "null".into(),
            "body: invalid type: null, expected a JSON object".into(),
        ),
        (
            hb,
            r#""heartbeat""#.into(),
            "body: invalid type: string".into(),
        ),
        (hb, "12".into(), "body: invalid type: integer".into()),
        (
            hb,
            r#"{"pipelines": {}}"#.into(),
            "pipelines: invalid type: map".into(),
        ),
        (
            hb,
            r#"{"pipelines": [["p", 1, "RUNNING"]]}"#.into(),
            "pipelines[0]: invalid type: sequence, expected a JSON object".into(),
        ),
        (
            hb,
            r#"{"pipelines": [{"version": 1, "status": "RUNNING"}]}"#.into(),
            "pipelines[0]: missing field `pipelineId`".into(),
        ),
        (
            hb,
            format!(r#"{{"pipelines": [{{"pipelineId": "{p}", "status": "RUNNING"}}]}}"#),
            "pipelines[0]: missing field `version`".into(),
        ),
        (
            hb,
            format!(
                r#"{{"pipelines": [{{"pipelineId": "{p}", "version": 1.5, "status": "RUNNING"}}]}}"#
            ),
            "pipelines[0].version: invalid value: floating point `1.5`, expected an integer >= 0"
                .into(),
        ),
        (
            hb,
            format!(
                r#"{{"pipelines": [{{"pipelineId": "{p}", "version": -1, "status": "RUNNING"}}]}}"#
            ),
            "pipelines[0].version: invalid value: integer `-1`".into(),
        ),
        (
            hb,
            report(r#""eventsIn": "12""#),
            "pipelines[0].eventsIn: invalid type: string".into(),
        ),
        (
            hb,
            report(r#""uptimeSeconds": true"#),
            "pipelines[0].uptimeSeconds: invalid type: boolean".into(),
        ),
        (
            hb,
            report(r#""pid": 12.5"#),
            "pipelines[0].pid: invalid value: floating point `12.5`".into(),
        ),
        (
            hb,
            report(r#""recentLogs": [1]"#),
            "pipelines[0].recentLogs[0]: invalid type: integer".into(),
        ),
        (
            hb,
            component(r#""receivedEvents": 1, "sentEvents": 1"#),
            "pipelines[0].componentMetrics[0]: missing field `componentKind`".into(),
        ),
        (
            hb,
            component(r#""componentKind": "source", "receivedEvents": "1", "sentEvents": 1"#),
            "pipelines[0].componentMetrics[0].receivedEvents: invalid type: string".into(),
        ),
        (
            hb,
            report(r#""componentMetrics": {"in": {"receivedEvents": 1}}"#),
            "pipelines[0].componentMetrics: invalid type: map".into(),
        ),
        (
            hb,
            r#"{"agentHealth": {"uptimeSeconds": "0.1"}}"#.into(),
            "agentHealth.uptimeSeconds: invalid type: string".into(),
        ),
        (
            hb,
            r#"{"agentHealth": {"pushConnected": 1}}"#.into(),
            "agentHealth.pushConnected: invalid type: integer".into(),
        ),
        (
            hb,
            r#"{"agentHealth": {"pipelinesRunning": 1.5}}"#.into(),
            "agentHealth.pipelinesRunning: invalid value: floating point `1.5`".into(),
        ),
        (
            hb,
            r#"{"agentHealth": [0, 0]}"#.into(),
            "agentHealth: invalid type: sequence, expected a JSON object".into(),
        ),
        (
            hb,
            r#"{"hostMetrics": [1, 2]}"#.into(),
            "hostMetrics: invalid type: sequence, expected a JSON object".into(),
        ),
        (
            hb,
            r#"{"hostMetrics": {"loadAvg1": "high"}}"#.into(),
            "hostMetrics.loadAvg1: invalid type: string".into(),
        ),
        (
            hb,
            r#"{"labels": {"zone": 1}}"#.into(),
            "labels.zone: invalid type: integer".into(),
        ),
        (
            "/api/agent/logs",
            "{}".into(),
            "body: invalid type: map, expected a sequence".into(),
        ),
        (
            "/api/agent/logs",
            r#"[{"lines": []}]"#.into(),
            "[0]: missing field `pipelineId`".into(),
        ),
        (
            "/api/agent/logs",
            r#"[["p", []]]"#.into(),
            "[0]: invalid type: sequence, expected a JSON object".into(),
        ),
        (
            "/api/agent/samples",
            "[]".into(),
            "body: invalid type: sequence, expected a JSON object".into(),
        ),
        (
            "/api/agent/samples",
            r#"{"results": [{"componentKey": "in"}]}"#.into(),
            "results[0]: missing field `requestId`".into(),
        ),
        (
            "/api/agent/tap-events",
            "[]".into(),
            "body: invalid type: sequence, expected a JSON object".into(),
        ),
        (
            "/api/agent/tap-events",
            r#"{"requestId": "t"}"#.into(),
            "body: missing field `pipelineId`".into(),
        ),
    ]
}

#[tokio::test]
async fn bad_shapes_are_refused_with_400_naming_the_field_and_store_nothing() {
    let f = fixture().await;
    for (route, body, expected) in bad_shapes(&f.pipeline_id) {
        let message = bad_request_message(f.send(route, &body).await).await;
        assert!(
            message.starts_with(&expected),
            "{route} {body}:\n  got      {message}\n  expected {expected}"
        );
        if route == "/api/agent/heartbeat" {
            // The config poll reads the same body the same way.
            let message = bad_request_message(f.send("/api/agent/config", &body).await).await;
            assert!(message.starts_with(&expected), "config {body}: {message}");
        }
    }
    for (body, expected) in [
        (
            "[]".to_string(),
            "body: invalid type: sequence, expected a JSON object",
        ),
        (
            json!({"token": ENROLLMENT_TOKEN}).to_string(),
            "body: missing field `hostname`",
        ),
    ] {
        let message = bad_request_message(f.app.post_enroll(body.clone()).await).await;
        assert!(message.starts_with(expected), "enroll {body}: {message}");
    }
    let view = f.app.node_view(&f.node_id).await;
    assert!(view.pipelines.is_empty(), "{:?}", view.pipelines);
    assert!(f.app.minutes(&f.pipeline_id).await.is_empty());
}

/// PostgreSQL cannot store a NUL character. An id carrying one names nothing of ours: a
/// heartbeat's report of it is ignored like any unknown pipeline, and the routes that store
/// the id refuse it naming the field (found by the fuzz test on PostgreSQL: it was a 500).
async fn nul_characters_in_ids_are_ignored_or_refused_never_a_server_error(app: TestApp) {
    let node = app.enroll("edge-1", &[]).await;
    let token = Some(node.node_token.as_str());
    let report =
        r#"{"pipelines":[{"pipelineId":"\u0000","recentLogs":[""],"status":"","version":1}]}"#;
    for route in ["/api/agent/heartbeat", "/api/agent/config"] {
        let resp = post(&app, route, token, report.to_string()).await;
        assert_eq!(resp.status(), StatusCode::OK, "{route}");
    }
    for (route, body, field) in [
        (
            "/api/agent/logs",
            r#"[{"pipelineId": "p\u0000", "lines": ["x"]}]"#,
            "[0].pipelineId: must not contain NUL characters",
        ),
        (
            "/api/agent/tap-events",
            r#"{"requestId": "t", "pipelineId": "p", "componentId": "in\u0000"}"#,
            "componentId: must not contain NUL characters",
        ),
        (
            "/api/agent/samples",
            r#"{"results": [{"requestId": "r\u0000", "componentKey": "in"}]}"#,
            "results[0].requestId: must not contain NUL characters",
        ),
    ] {
        let message = bad_request_message(post(&app, route, token, body.to_string()).await).await;
        assert!(message.starts_with(field), "{route}: {message}");
    }
}

#[tokio::test]
async fn nul_characters_in_ids_are_ignored_or_refused_never_a_server_error_on_sqlite() {
    nul_characters_in_ids_are_ignored_or_refused_never_a_server_error(TestApp::spawn().await).await;
}

#[tokio::test]
async fn nul_characters_in_ids_are_ignored_or_refused_never_a_server_error_on_postgres() {
    nul_characters_in_ids_are_ignored_or_refused_never_a_server_error(
        TestApp::spawn_postgres().await,
    )
    .await;
}
