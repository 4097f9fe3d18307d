//! customPromQL gates end to end: a rollout whose gate queries a real Prometheus advances or
//! rolls back on the answer; every answer that is not a single number (and every error,
//! timeout and unreachable Prometheus) fails closed with a reason naming it; the bearer
//! token travels only in the `Authorization` header and shows up nowhere else.

use std::time::Duration;

use serde_json::{json, Value};
use vf_control::pipelines;
use vf_control::testing::TestDb;

use crate::helpers::{LogCapture, TestApp};
use crate::prometheus::{
    after_preflight, prometheus_settings, unreachable_url, Answer, FakePrometheus, Prometheus,
    ERROR_RATIO, ERROR_RATIO_RULE,
};

const BAKE_MS: i64 = 30_000;
const TOKEN: &str = "vf-prom-token-3d9f7a1c5e";

fn promql(query: &str, comparator: &str, threshold: f64) -> Value {
    json!({"customPromQL": {"query": query, "comparator": comparator, "threshold": threshold}})
}

fn stage(percentage: u32, gates: Vec<Value>) -> Value {
    json!({"selector": {"percentage": percentage}, "bakeSeconds": BAKE_MS / 1000, "gates": gates})
}

/// A canary of v2 rolled out by `plan` over two enrolled nodes, on a pipeline deployed at v1.
struct Rollout {
    pipeline_id: String,
    release_id: String,
}

async fn start_rollout(app: &TestApp, mut plan: Value) -> Rollout {
    // The enrolled nodes never report: these tests are about PromQL, not proof of apply.
    plan["minAppliedPercent"] = json!(0);
    app.enroll("edge-1", &[("tier", "edge")]).await;
    app.enroll("edge-2", &[("tier", "edge")]).await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "v: 1\n").await;
    let release = app
        .call_ok(
            "release.canary.create",
            json!({
                "pipeline_id": pipeline.id,
                "config_yaml": "v: 2\n",
                "changelog": "gated by PromQL",
                "rollout_plan": plan,
            }),
        )
        .await;
    assert_eq!(release["status"], "CANARY_DEPLOYED");
    Rollout {
        pipeline_id: pipeline.id,
        release_id: release["id"].as_str().unwrap().to_string(),
    }
}

impl Rollout {
    async fn release(&self, app: &TestApp) -> Value {
        app.call_ok("release.canary.get", json!({"release_id": self.release_id}))
            .await
    }

    async fn deployed_version(&self, app: &TestApp) -> Option<i64> {
        pipelines::get_pipeline(&app.control.db, &self.pipeline_id)
            .await
            .unwrap()
            .deployed_version
    }
}

/// The gate results of the latest evaluation of stage `index` (0-based).
fn latest_results(release: &Value, index: usize) -> Vec<Value> {
    let evaluations = release["stages"][index]["evaluations"]
        .as_array()
        .unwrap_or_else(|| panic!("no evaluations of stage {index}: {release}"));
    evaluations.last().expect("an evaluation")["results"]
        .as_array()
        .unwrap()
        .clone()
}

/// Bakes a one-stage rollout whose only gate is `gate` and returns the gate's recorded
/// result, asserting the release rolled back (the gates' verdict on a failure) or completed.
async fn bake_single_gate(app: &TestApp, gate: Value) -> Value {
    let rollout = start_rollout(app, json!({"stages": [stage(100, vec![gate])]})).await;
    let outcomes = app.tick_after(BAKE_MS).await;
    let release = rollout.release(app).await;
    assert_eq!(outcomes.len(), 1, "{release}");
    let results = latest_results(&release, 0);
    assert_eq!(results.len(), 1, "{release}");
    let result = results[0].clone();
    let expected = if result["verdict"] == "pass" {
        ("complete", "BROADENED")
    } else {
        ("rollback", "ROLLED_BACK")
    };
    assert_eq!(
        (
            outcomes[0].decision.as_str(),
            release["status"].as_str().unwrap()
        ),
        expected,
        "{release}"
    );
    result
}

/// Asserts `result` failed closed: no observed value, threshold and query kept, and the reason.
fn assert_failed_closed(result: &Value, query: &str, reason: &str) {
    assert_eq!(result["gate"], "customPromQL", "{result}");
    assert_eq!(result["verdict"], "fail", "{result}");
    assert_eq!(result["observed"], Value::Null, "{result}");
    assert_eq!(result["threshold"], 1.0, "{result}");
    assert_eq!(result["query"], query, "{result}");
    assert_eq!(result["reason"], reason, "{result}");
}

// --- a real Prometheus ----------------------------------------------------------------

#[tokio::test]
async fn a_promql_gate_under_its_threshold_on_real_prometheus_advances_each_stage_and_completes() {
    let prometheus = Prometheus::start().await;
    let app = TestApp::spawn_with_prometheus(&prometheus.url, None).await;
    let plan = json!({"stages": [
        stage(50, vec![json!({"healthWindow": {}}), promql(ERROR_RATIO_RULE, "lt", 0.05)]),
        stage(100, vec![promql("scalar(vector(0.02))", "lt", 0.05)]),
    ]});
    let rollout = start_rollout(&app, plan).await;

    assert_eq!(
        app.tick_after(BAKE_MS).await[0].decision.as_str(),
        "advance"
    );
    let advanced = rollout.release(&app).await;
    assert_eq!(advanced["status"], "CANARY_DEPLOYED");
    assert_eq!(advanced["current_stage"], 1);
    assert_eq!(
        app.tick_after(BAKE_MS).await[0].decision.as_str(),
        "complete"
    );

    let done = rollout.release(&app).await;
    assert_eq!(done["status"], "BROADENED");
    assert_eq!(rollout.deployed_version(&app).await, Some(2));
    // The recording rule is a one-sample vector; the second stage's query a scalar.
    let first = &latest_results(&done, 0)[1];
    assert_eq!(
        (&first["gate"], &first["verdict"]),
        (&json!("customPromQL"), &json!("pass"))
    );
    assert_eq!(first["observed"], ERROR_RATIO);
    assert_eq!(first["threshold"], 0.05);
    assert_eq!(first["query"], ERROR_RATIO_RULE);
    assert_eq!(first["reason"], "query result 0.02 is less than 0.05");
    let second = &latest_results(&done, 1)[0];
    assert_eq!(second["verdict"], "pass", "{second}");
    assert_eq!(second["observed"], ERROR_RATIO);
    assert_eq!(second["query"], "scalar(vector(0.02))");
}

#[tokio::test]
async fn a_promql_gate_over_its_threshold_on_real_prometheus_rolls_back_recording_its_evidence() {
    let prometheus = Prometheus::start().await;
    let app = TestApp::spawn_with_prometheus(&prometheus.url, None).await;
    let plan = json!({"stages": [
        stage(50, vec![promql(ERROR_RATIO_RULE, "lt", 0.01)]),
        stage(100, vec![json!({"healthWindow": {}})]),
    ]});
    let rollout = start_rollout(&app, plan).await;

    assert_eq!(
        app.tick_after(BAKE_MS).await[0].decision.as_str(),
        "rollback"
    );

    let release = rollout.release(&app).await;
    assert_eq!(release["status"], "ROLLED_BACK");
    assert_eq!(release["stages"][0]["outcome"], "failed");
    let result = &latest_results(&release, 0)[0];
    assert_eq!(result["verdict"], "fail");
    assert_eq!(result["observed"], ERROR_RATIO);
    assert_eq!(result["threshold"], 0.01);
    assert_eq!(result["query"], ERROR_RATIO_RULE);
    assert_eq!(result["reason"], "query result 0.02 is not less than 0.01");
    assert_eq!(
        release["failure_reason"],
        "stage 1 failed: customPromQL: query result 0.02 is not less than 0.01"
    );
    // Rolled back: v1's config is published again as v3 and deployed.
    assert_eq!(rollout.deployed_version(&app).await, Some(3));
    let events =
        vf_control::testing::audit_for_target(&app.control.db, "release", &rollout.release_id, 10)
            .await
            .unwrap();
    let rollback = events
        .iter()
        .find(|e| e.action == "release.rollback")
        .expect("a rollback audit event");
    let details: Value = serde_json::from_str(&rollback.details).unwrap();
    assert_eq!(details["gateResults"][0], *result);
}

#[tokio::test]
async fn a_one_sample_vector_from_real_prometheus_is_compared_against_the_threshold() {
    let prometheus = Prometheus::start().await;
    let passing = TestApp::spawn_with_prometheus(&prometheus.url, None).await;
    let result = bake_single_gate(&passing, promql("vector(1)", "gte", 1.0)).await;
    assert_eq!(result["verdict"], "pass", "{result}");
    assert_eq!(result["observed"], 1.0);
    assert_eq!(result["reason"], "query result 1 is at least 1");

    let failing = TestApp::spawn_with_prometheus(&prometheus.url, None).await;
    let result = bake_single_gate(&failing, promql("vector(1)", "gt", 1.0)).await;
    assert_eq!(result["verdict"], "fail", "{result}");
    assert_eq!(result["observed"], 1.0);
    assert_eq!(result["reason"], "query result 1 is not greater than 1");
}

/// `release.canary.create` with a one-stage plan gated by `query`, refused with 400; returns
/// the message.
async fn refused_at_create(app: &TestApp, query: &str) -> String {
    app.enroll("edge-1", &[("tier", "edge")]).await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "v: 1\n").await;
    let plan = json!({"stages": [stage(100, vec![promql(query, "lt", 1.0)])]});
    let message = app
        .call_refused(
            "release.canary.create",
            json!({"pipeline_id": pipeline.id, "config_yaml": "v: 2\n", "rollout_plan": plan}),
            400,
        )
        .await;
    let (status, releases) = app
        .call("release.list", json!({"pipeline_id": pipeline.id}))
        .await;
    assert_eq!(
        (status, releases.as_str()),
        (200, "[]"),
        "nothing was created"
    );
    message
}

const QUERY_FIELD: &str = "rolloutPlan.stages[0].gates[0].customPromQL.query";

#[tokio::test]
async fn a_query_returning_several_series_on_real_prometheus_is_refused_at_create() {
    let prometheus = Prometheus::start().await;
    let app = TestApp::spawn_with_prometheus(&prometheus.url, None).await;
    let query = r#"vector(1) or label_replace(vector(2), "x", "y", "", "")"#;
    assert_eq!(
        refused_at_create(&app, query).await,
        format!(
            "{QUERY_FIELD}: does not return exactly one number: multi-sample vector (2 series)"
        )
    );
}

#[tokio::test]
async fn a_query_returning_no_data_on_real_prometheus_is_refused_at_create() {
    let prometheus = Prometheus::start().await;
    let app = TestApp::spawn_with_prometheus(&prometheus.url, None).await;
    assert_eq!(
        refused_at_create(&app, "vector(1) > 5").await,
        format!(
            "{QUERY_FIELD}: returns no data now (empty vector: no series matched); \
             a gate needs exactly one number"
        )
    );
}

#[tokio::test]
async fn a_query_real_prometheus_cannot_parse_is_refused_at_create_with_its_error() {
    let prometheus = Prometheus::start().await;
    let app = TestApp::spawn_with_prometheus(&prometheus.url, None).await;
    let message = refused_at_create(&app, "sum(rate(x[5m]").await;
    assert!(
        message.starts_with(&format!(
            "{QUERY_FIELD}: does not return exactly one number: Prometheus answered HTTP 400 (bad_data: "
        )) && message.contains("parse error"),
        "{message}"
    );
}

#[tokio::test]
async fn a_plan_is_refused_at_create_when_prometheus_cannot_be_reached() {
    let app = TestApp::spawn_with_prometheus(&unreachable_url(), Some(TOKEN)).await;
    assert_eq!(
        refused_at_create(&app, "edge_errors").await,
        format!(
            "{QUERY_FIELD}: does not return exactly one number: could not reach Prometheus \
             (connection refused)"
        )
    );
}

#[tokio::test]
async fn test_query_shows_what_real_prometheus_gives_now_against_the_threshold() {
    let prometheus = Prometheus::start().await;
    let app = TestApp::spawn_with_prometheus(&prometheus.url, None).await;
    let test = |query: &str, threshold: Value| {
        app.call_ok(
            "promql.test",
            json!({"query": query, "comparator": "lt", "threshold": threshold}),
        )
    };
    let failing = test("vector(1)", json!(0.5)).await;
    assert_eq!(
        failing,
        json!({"value": 1.0, "passes": false, "text": "query result 1 is not less than 0.5"})
    );
    assert_eq!(test("vector(1)", json!(2)).await["passes"], true);
    let empty = test("vector(1) > 5", json!(1)).await;
    assert_eq!(empty["value"], Value::Null);
    assert_eq!(
        empty["text"],
        "returns no data now (empty vector: no series matched); a gate needs exactly one number"
    );
    // Without a threshold it just reads the value.
    let bare = app
        .call_ok("promql.test", json!({"query": "vector(3)"}))
        .await;
    assert_eq!(bare["text"], "query result 3");
}

// --- answers only a fake gives on demand ----------------------------------------------

/// Bakes a one-gate rollout against a fake answering `answer`, queried with [`TOKEN`] and
/// `timeout_ms`; returns the recorded gate result after checking how the token travelled.
async fn gate_result_from_fake(answer: Answer, timeout_ms: Option<u64>) -> Value {
    let fake = FakePrometheus::start(after_preflight(move |_| answer.clone())).await;
    let settings = prometheus_settings(&fake.url, Some(TOKEN), timeout_ms);
    let app = TestApp::spawn_with(TestDb::sqlite(), |c| c.prometheus = Some(settings)).await;
    let result = bake_single_gate(&app, promql("edge_errors", "lt", 1.0)).await;
    fake.assert_token_sent_as_header_only(TOKEN);
    // The deadline's final check is counted as what it was (an error, or no data for NaN),
    // apart from a value over the threshold, while the settled verdict fails closed.
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let check = |verdict: &str| {
        metrics.contains(&format!(
            r#"vectorflow_gate_checks_total{{gate="customPromQL",verdict="{verdict}"}} 1"#
        ))
    };
    assert!(check("error") || check("inconclusive"), "{metrics}");
    assert!(!check("fail"), "{metrics}");
    assert!(
        metrics.contains(r#"vectorflow_gate_results_total{gate="customPromQL",verdict="fail"} 1"#),
        "{metrics}"
    );
    result
}

#[tokio::test]
async fn an_http_500_from_prometheus_fails_closed_naming_the_status_and_its_error() {
    let answer = Answer::error(500, "internal", "storage is on fire");
    let result = gate_result_from_fake(answer, None).await;
    assert_failed_closed(
        &result,
        "edge_errors",
        "Prometheus answered HTTP 500 (internal: storage is on fire): fails closed",
    );
}

#[tokio::test]
async fn an_error_status_from_prometheus_fails_closed_with_its_error() {
    let answer = Answer::error(
        200,
        "execution",
        "query processing would load too many samples",
    );
    let result = gate_result_from_fake(answer, None).await;
    assert_failed_closed(
        &result,
        "edge_errors",
        "Prometheus returned an error (execution: query processing would load too many samples): fails closed",
    );
}

#[tokio::test]
async fn a_nan_result_fails_closed_saying_nan() {
    let result = gate_result_from_fake(Answer::sample("NaN"), None).await;
    assert_failed_closed(&result, "edge_errors", "result is NaN: fails closed");
}

#[tokio::test]
async fn a_non_numeric_result_fails_closed_saying_it_is_not_a_number() {
    let result = gate_result_from_fake(Answer::sample("high"), None).await;
    assert_failed_closed(
        &result,
        "edge_errors",
        "result \"high\" is not a number: fails closed",
    );
}

#[tokio::test]
async fn an_answer_slower_than_the_prometheus_timeout_fails_closed_saying_timeout() {
    // A valid, passing answer, but only after 2 s: the 200 ms timeout must cut it off.
    let slow = Answer::sample("0").after(Duration::from_secs(2));
    let result = gate_result_from_fake(slow, Some(200)).await;
    assert_failed_closed(&result, "edge_errors", "query timed out: fails closed");
}

// --- the bearer token -----------------------------------------------------------------

#[tokio::test(flavor = "current_thread")]
async fn the_prometheus_bearer_token_appears_in_no_log_answer_gate_evidence_or_audit_event() {
    let logs = LogCapture::start();
    // Answers that put the request into error text: a proxy echoing the header it refused.
    let fake = FakePrometheus::start(after_preflight(|query| match query {
        "edge_errors_500" => Answer::error(
            500,
            "internal",
            &format!("upstream refused Authorization: Bearer {TOKEN}"),
        ),
        "edge_errors_error" => Answer::error(200, "execution", "too many samples"),
        _ => Answer::sample("0").after(Duration::from_secs(2)),
    }))
    .await;
    let settings = prometheus_settings(&fake.url, Some(TOKEN), Some(200));
    let app = TestApp::spawn_with(TestDb::postgres().await, |c| {
        c.prometheus = Some(settings);
    })
    .await;
    let plan = json!({"stages": [stage(100, vec![
        promql("edge_errors_500", "lt", 1.0),
        promql("edge_errors_error", "lt", 1.0),
        promql("edge_errors_slow", "lt", 1.0),
    ])]});
    let rollout = start_rollout(&app, plan).await;

    // A manual complete is refused with the failing gate; the scheduler then rolls back.
    let (status, refused) = app
        .call(
            "release.canary.complete",
            json!({"release_id": rollout.release_id}),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused.contains("customPromQL gate failed"), "{refused}");
    assert_eq!(
        app.tick_after(BAKE_MS).await[0].decision.as_str(),
        "rollback"
    );

    let release = rollout.release(&app).await;
    assert_eq!(release["status"], "ROLLED_BACK");
    let reasons: Vec<String> = latest_results(&release, 0)
        .iter()
        .map(|r| r["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        reasons,
        [
            "Prometheus answered HTTP 500 (internal: upstream refused Authorization: Bearer ***): fails closed",
            "Prometheus returned an error (execution: too many samples): fails closed",
            "query timed out: fails closed",
        ]
    );
    let env = json!({"environment_id": app.env_id});
    let mut answers = vec![
        ("release.canary.complete".to_string(), refused),
        ("release.canary.get".to_string(), release.to_string()),
    ];
    for (endpoint, body) in [
        ("release.list", json!({"pipeline_id": rollout.pipeline_id})),
        ("fleet.nodes", env.clone()),
        ("fleet.groups", env.clone()),
        ("pipeline.list", env.clone()),
        ("pipeline.get", json!({"id": rollout.pipeline_id})),
        (
            "pipeline.nodes",
            json!({"pipeline_id": rollout.pipeline_id}),
        ),
        ("environment.list", json!({})),
    ] {
        let (status, text) = app.call(endpoint, body).await;
        assert_eq!(status, 200, "{endpoint}: {text}");
        answers.push((endpoint.to_string(), text));
    }
    for path in [
        "/metrics".to_string(),
        "/".to_string(),
        format!("/pipelines/{}", rollout.pipeline_id),
    ] {
        // Bounded, so a page that never finishes rendering fails naming itself.
        let resp = app
            .api
            .get(format!("{}{path}", app.url))
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(resp.status(), 200, "{path}");
        answers.push((path, resp.text().await.unwrap()));
    }
    for (kind, id) in [
        ("release", &rollout.release_id),
        ("pipeline", &rollout.pipeline_id),
    ] {
        for event in vf_control::testing::audit_for_target(&app.control.db, kind, id, 100)
            .await
            .unwrap()
        {
            answers.push((format!("audit {}", event.action), event.details));
        }
    }
    answers.push((
        "Debug of the control handle".into(),
        format!("{:?}", app.control),
    ));

    // The token was in play: sent on every query, and the scenario was logged.
    fake.assert_token_sent_as_header_only(TOKEN);
    let logs = logs.text();
    // From the server's request handling and from the scheduler step.
    assert!(logs.contains("canary release created"), "{logs}");
    assert!(logs.contains("release transition"), "{logs}");
    assert!(answers
        .iter()
        .any(|(what, _)| what == "audit release.rollback"));
    for (what, text) in &answers {
        assert!(!text.contains(TOKEN), "the token is in {what}: {text}");
    }
    assert!(!logs.contains(TOKEN), "the token is in the logs:\n{logs}");
}

#[tokio::test]
async fn a_token_quoted_back_bare_by_prometheus_is_not_repeated_in_the_gate_reason() {
    let answer = Answer::error(
        401,
        "unauthorized",
        &format!("token {TOKEN} is not valid for tenant edge"),
    );
    let result = gate_result_from_fake(answer, None).await;
    assert_eq!(result["verdict"], "fail", "{result}");
    let reason = result["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("Prometheus answered HTTP 401"),
        "{reason}"
    );
    assert!(!reason.contains(TOKEN), "{reason}");
}

// --- without a Prometheus ---------------------------------------------------------------

#[tokio::test]
async fn a_promql_gate_is_refused_naming_the_field_when_prometheus_is_not_configured() {
    let app = TestApp::spawn().await;
    app.enroll("edge-1", &[]).await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "v: 1\n").await;
    let plan = json!({"stages": [stage(100, vec![
        json!({"healthWindow": {}}),
        promql("edge_errors", "lt", 1.0),
    ])]});

    let (status, body) = app
        .call(
            "release.canary.create",
            json!({
                "pipeline_id": pipeline.id,
                "config_yaml": "v: 2\n",
                "rollout_plan": plan,
            }),
        )
        .await;

    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("rolloutPlan.stages[0].gates[1].customPromQL")
            && body.contains("VF_PROMETHEUS_URL"),
        "{body}"
    );
    let releases = app
        .call_ok("release.list", json!({"pipeline_id": pipeline.id}))
        .await;
    assert_eq!(releases, json!([]));
    let versions = pipelines::list_versions(&app.control.db, &pipeline.id)
        .await
        .unwrap();
    assert_eq!(versions.len(), 1, "no canary version was minted");
}
