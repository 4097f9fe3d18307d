//! What a broken or hostile agent's numbers and text do, table by table: values of the wrong
//! type or deeply nested are refused with 400 naming the field and leave nothing stored;
//! counters no i64 holds (or negative) are ignored for their field and the rest of the
//! heartbeat kept; unicode is stored as reported; the body limit is exact. And the
//! release that jammed in production: a canary reporting `i64::MAX`, a restart to 0, then
//! `i64::MAX` again must still be decided, and the operators' buttons answer with a reason.

use reqwest::StatusCode;
use serde_json::{json, Value};
use vf_control::releases;

use crate::fuzz_agent::COUNTER_FIELDS;
use crate::helpers::{bad_request_message, labels, TestApp, ENROLLMENT_TOKEN, MINUTE};

/// A heartbeat whose one report has `field` set to the JSON literal `literal`, kept as
/// text so numbers beyond what serde_json's `Value` holds (`1e400`) reach the server.
fn report_with(pipeline_id: &str, field: &str, literal: &str) -> String {
    let id = format!("{pipeline_id:?}");
    let mut fields = vec![
        ("pipelineId", id.as_str()),
        ("version", "1"),
        ("status", r#""RUNNING""#),
    ];
    fields.retain(|(name, _)| *name != field);
    fields.push((field, literal));
    let fields: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!(r#""{name}": {value}"#))
        .collect();
    format!(r#"{{"pipelines": [{{{}}}]}}"#, fields.join(", "))
}

/// Values that are not JSON numbers at all, or a number beyond what JSON parsers read as a
/// double (`1e400`): the wrong type for any numeric field.
const NOT_NUMBERS: [&str; 6] = [r#""12""#, "true", "{}", "[]", r#"[1, 2]"#, "1e400"];

/// Numbers the integer fields (`version`, `pid`) cannot take: fractions and values past i64.
const NOT_INTEGERS: [&str; 5] = [
    "1.5",
    "-0.5",
    "18446744073709551615",
    "9223372036854775808",
    "1e19",
];

/// Numbers no counter can use: negative, or past i64. JSON's `-0` is zero and usable.
const UNUSABLE_COUNTERS: [&str; 6] = [
    "-1",
    "-0.5",
    "18446744073709551615",
    "9223372036854775808",
    "1e19",
    "1e308",
];

#[tokio::test]
async fn numbers_of_the_wrong_type_are_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;

    let fields = COUNTER_FIELDS
        .into_iter()
        .chain(["uptimeSeconds", "pid", "version"]);
    let cases = fields.flat_map(|field| {
        let refused: Vec<&str> = match field {
            "pid" | "version" => NOT_NUMBERS.into_iter().chain(NOT_INTEGERS).collect(),
            _ => NOT_NUMBERS.to_vec(),
        };
        refused.into_iter().map(move |literal| (field, literal))
    });
    for (field, literal) in cases {
        let body = report_with(&pipeline.id, field, literal);
        let resp = app.post_heartbeat(&node.node_token, body).await;
        let message = bad_request_message(resp).await;
        assert!(
            message.starts_with(&format!("pipelines[0].{field}:")),
            "{field} = {literal}: {message}"
        );
    }
    // The config poll reads the same body the same way.
    for literal in NOT_NUMBERS {
        let body = report_with(&pipeline.id, "eventsIn", literal);
        let message = bad_request_message(app.post_config(&node.node_token, body).await).await;
        assert!(
            message.starts_with("pipelines[0].eventsIn:"),
            "{literal}: {message}"
        );
    }

    let view = app.node_view(&node.node_id).await;
    assert!(view.pipelines.is_empty(), "{:?}", view.pipelines);
    assert_eq!(view.node.last_seen_at, None);
    assert!(app.minutes(&pipeline.id).await.is_empty());
}

#[tokio::test]
async fn counters_no_i64_holds_or_negative_are_ignored_and_the_rest_of_the_report_kept() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;

    for field in COUNTER_FIELDS.into_iter().chain(["uptimeSeconds"]) {
        for literal in UNUSABLE_COUNTERS {
            let body = report_with(&pipeline.id, field, literal);
            let resp = app.post_heartbeat(&node.node_token, body).await;
            assert_eq!(resp.status(), StatusCode::OK, "{field} = {literal}");
        }
    }
    let view = app.node_view(&node.node_id).await;
    let stored = &view.pipelines[0];
    assert_eq!(
        (stored.version, stored.status.as_str()),
        (Some(1), "RUNNING")
    );
    assert_eq!((stored.events_in, stored.errors_total), (0, 0));
    assert!(app.minutes(&pipeline.id).await.is_empty());
}

#[tokio::test]
async fn a_null_counter_is_taken_as_an_absent_counter() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;

    for field in COUNTER_FIELDS {
        let resp = app
            .post_heartbeat(&node.node_token, report_with(&pipeline.id, field, "null"))
            .await;
        assert_eq!(resp.status(), StatusCode::OK, "{field}: null");
    }
    let stored = &app.node_view(&node.node_id).await.pipelines[0];
    assert_eq!(
        (stored.events_in, stored.events_out, stored.errors_total),
        (0, 0, 0)
    );
    assert!(app.minutes(&pipeline.id).await.is_empty());
}

/// `depth` nested arrays: `[[[...]]]`.
fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// `depth` nested objects: `{"a":{"a":...}}`.
fn nested_objects(depth: usize) -> String {
    format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
}

/// What a deeply nested body gets: refused naming where the nesting is (by its path in
/// the body), or taken when the nesting is in a field nobody reads.
enum Expect {
    Refused(&'static str),
    Taken,
}

#[tokio::test]
async fn ten_thousand_levels_of_nesting_are_refused_naming_the_field_or_ignored_when_unknown() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;
    let arrays = nested_arrays(10_000);
    let objects = nested_objects(10_000);
    let report = |extra: &str| {
        format!(
            r#"{{"pipelines": [{{"pipelineId": "{}", "version": 1, "status": "RUNNING", "eventsIn": 5}}], {extra}}}"#,
            pipeline.id
        )
    };
    let cases = [
        // A heartbeat is an object, and so is every object inside it: an array is refused
        // where an object belongs, before any of its depth is read.
        (
            arrays.clone(),
            Expect::Refused("body: invalid type: sequence, expected a JSON object"),
        ),
        (
            report(&format!(r#""hostMetrics": {arrays}"#)),
            Expect::Refused("hostMetrics: invalid type: sequence, expected a JSON object"),
        ),
        (
            report(&format!(r#""labels": {objects}"#)),
            Expect::Refused("labels.a: invalid type: map"),
        ),
        (
            format!(r#"{{"pipelines": {arrays}}}"#),
            Expect::Refused("pipelines[0]: invalid type: sequence, expected a JSON object"),
        ),
        (
            report_with(&pipeline.id, "eventsIn", &arrays),
            Expect::Refused("pipelines[0].eventsIn: invalid type: sequence"),
        ),
        (
            report_with(&pipeline.id, "recentLogs", &arrays),
            Expect::Refused("pipelines[0].recentLogs[0]: invalid type: sequence"),
        ),
        // Unknown fields are ignored (SPEC section 4), however deep.
        (objects.clone(), Expect::Taken),
    ];

    for (body, expect) in &cases {
        for resp in [
            app.post_heartbeat(&node.node_token, body.clone()).await,
            app.post_config(&node.node_token, body.clone()).await,
        ] {
            match expect {
                Expect::Refused(prefix) => {
                    let message = bad_request_message(resp).await;
                    assert!(message.starts_with(prefix), "{prefix}: {message}");
                }
                Expect::Taken => assert_eq!(resp.status(), StatusCode::OK),
            }
        }
    }
    // Sampled events are free-form JSON: there the depth is read, and the parser's
    // recursion limit refuses it.
    let recursion = report(&format!(
        r#""sampleResults": [{{"requestId": "r", "componentKey": "in", "events": {arrays}}}]"#
    ));
    let message = bad_request_message(app.post_heartbeat(&node.node_token, recursion).await).await;
    assert!(
        message.starts_with("sampleResults[0].events[0]"),
        "{message}"
    );
    assert!(message.contains("recursion limit exceeded"), "{message}");
    let enroll =
        format!(r#"{{"token": "{ENROLLMENT_TOKEN}", "hostname": "deep-1", "labels": {objects}}}"#);
    let message = bad_request_message(app.post_enroll(enroll).await).await;
    assert!(
        message.starts_with("labels.a: invalid type: map"),
        "{message}"
    );
    let message = bad_request_message(app.post_enroll(arrays.clone()).await).await;
    assert!(
        message.starts_with("body: invalid type: sequence, expected a JSON object"),
        "{message}"
    );

    // Nothing of it was stored: no report, no second node.
    assert!(app.node_view(&node.node_id).await.pipelines.is_empty());
    let nodes = vf_control::fleet::list_nodes(&app.control.db, &app.env_id)
        .await
        .unwrap();
    assert_eq!(nodes.len(), 1);
    assert!(app.minutes(&pipeline.id).await.is_empty());

    // A report carrying ten thousand levels in a field it does not know is taken.
    let future = report(&format!(r#""futureField": {arrays}"#));
    let resp = app.post_heartbeat(&node.node_token, future).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(app.node_view(&node.node_id).await.pipelines[0].events_in, 5);
    // So is one whose hostMetrics carries them in a field hostMetrics does not have.
    let deep_host = report(&format!(r#""hostMetrics": {objects}"#));
    let resp = app.post_heartbeat(&node.node_token, deep_host).await;
    assert_eq!(resp.status(), StatusCode::OK);
}

#[tokio::test]
async fn unicode_statuses_labels_and_hostnames_are_stored_as_reported() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let rtl_hostname = "خادم-الحافة-١";
    let enrolled = app
        .post_enroll(
            json!({
                "token": ENROLLMENT_TOKEN, "hostname": rtl_hostname,
                "labels": { "region": "🇪🇺", "owner": "\u{202E}nimda" }
            })
            .to_string(),
        )
        .await;
    assert_eq!(enrolled.status(), StatusCode::OK);
    let node: vf_protocol::EnrollResponse = enrolled.json().await.unwrap();
    let view = app.node_view(&node.node_id).await;
    assert_eq!(view.node.hostname, rtl_hostname);
    assert_eq!(
        view.labels,
        labels(&[("region", "🇪🇺"), ("owner", "\u{202E}nimda")])
    );

    let status = "🚀 RUNNING \u{202E}ʇsǝʇ";
    let body = json!({
        "pipelines": [
            { "pipelineId": pipeline.id, "version": 1, "status": status, "eventsIn": 3 },
            // A pipeline id nobody has: ignored, like any unknown pipeline.
            { "pipelineId": "管道-😀\u{202E}", "version": 1, "status": "RUNNING", "eventsIn": 9 }
        ],
        "labels": { "region": "日本", "tier": "ékoszisztéma" }
    });
    let resp = app.post_heartbeat(&node.node_token, body.to_string()).await;
    assert_eq!(resp.status(), StatusCode::OK);

    let view = app.node_view(&node.node_id).await;
    assert_eq!(view.pipelines.len(), 1);
    assert_eq!(view.pipelines[0].pipeline_id, pipeline.id);
    assert_eq!(view.pipelines[0].status, status);
    assert_eq!(
        view.labels,
        labels(&[("region", "日本"), ("tier", "ékoszisztéma")])
    );
    assert_eq!(app.minutes(&pipeline.id).await[0].events_in, 3);
}

#[tokio::test]
async fn a_long_unicode_status_is_cut_at_a_character_boundary_never_refused() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;
    // 30 three-byte characters: 90 bytes, over the 64 kept.
    let body = json!({ "pipelines": [{
        "pipelineId": pipeline.id, "version": 1, "status": "€".repeat(30)
    }]});

    let resp = app.post_heartbeat(&node.node_token, body.to_string()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        app.node_view(&node.node_id).await.pipelines[0].status,
        "€".repeat(21)
    );
}

#[tokio::test]
async fn label_values_are_limited_to_256_bytes_and_keys_to_label_characters() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let heartbeat = |labels: Value| json!({ "pipelines": [], "labels": labels }).to_string();
    // "é" is two bytes: 128 of them fill the limit exactly.
    let at_limit = "é".repeat(128);

    let refused = [
        (json!({ "tier": "é".repeat(129) }), "labels.tier:"),
        (json!({ "🔥": "hot" }), "labels.🔥:"),
        (json!({ "tier": "edge\u{0}" }), "labels.tier:"),
        (json!({ "tier": "line\nbreak" }), "labels.tier:"),
    ];
    for (pairs, field) in refused {
        let message =
            bad_request_message(app.post_heartbeat(&node.node_token, heartbeat(pairs)).await).await;
        assert!(message.starts_with(field), "{message}");
    }
    assert!(app.node_view(&node.node_id).await.labels.is_empty());

    let resp = app
        .post_heartbeat(&node.node_token, heartbeat(json!({ "tier": at_limit })))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(app.node_view(&node.node_id).await.labels["tier"], at_limit);
}

#[tokio::test]
async fn a_body_of_exactly_the_size_limit_is_taken_and_one_byte_more_is_refused_with_413() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;
    let limit = 1024 * 1024;
    let sized = |size: usize| {
        let head = format!(
            r#"{{"pipelines": [{{"pipelineId": "{}", "version": 1, "status": "RUNNING", "eventsIn": 1}}], "hostMetrics": {{"padding": ""#,
            pipeline.id
        );
        let tail = r#""}}"#;
        let padding = "x".repeat(size - head.len() - tail.len());
        let body = format!("{head}{padding}{tail}");
        assert_eq!(body.len(), size);
        body
    };

    let over = app.post_heartbeat(&node.node_token, sized(limit + 1)).await;
    assert_eq!(over.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(app.node_view(&node.node_id).await.pipelines.is_empty());

    let at = app.post_heartbeat(&node.node_token, sized(limit)).await;
    assert_eq!(at.status(), StatusCode::OK);
    assert_eq!(app.node_view(&node.node_id).await.pipelines[0].events_in, 1);
}

#[tokio::test]
async fn more_than_500_reports_in_one_heartbeat_are_refused_naming_pipelines() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    let node = app.enroll("edge-1", &[]).await;
    let reports: Vec<Value> = (0..501)
        .map(|_| json!({ "pipelineId": pipeline.id, "version": 1, "status": "RUNNING", "eventsIn": 1 }))
        .collect();

    let resp = app
        .post_heartbeat(
            &node.node_token,
            json!({ "pipelines": reports }).to_string(),
        )
        .await;

    let message = bad_request_message(resp).await;
    assert!(message.starts_with("pipelines:"), "{message}");
    assert!(app.node_view(&node.node_id).await.pipelines.is_empty());
    assert!(app.minutes(&pipeline.id).await.is_empty());
}

// --- the release that jammed ------------------------------------------------------------

fn running(pipeline_id: &str, version: i64, events_in: i64) -> String {
    json!({ "pipelines": [{
        "pipelineId": pipeline_id, "version": version, "status": "RUNNING",
        "eventsIn": events_in, "eventsOut": events_in, "errorsTotal": 0
    }]})
    .to_string()
}

/// A server function's answer must be 2xx, or 4xx with a `ServerError|<reason>` body.
fn answered_with_a_reason(endpoint: &str, (status, body): &(u16, String)) {
    assert!(
        (200..300).contains(status) || (400..500).contains(status),
        "{endpoint}: {status} {body}"
    );
    if *status >= 400 {
        let reason = body.strip_prefix("ServerError|").unwrap_or_default();
        assert!(!reason.trim().is_empty(), "{endpoint}: {status} {body}");
    }
}

/// In production a canary reported `eventsIn: 9223372036854775807`, restarted to 0 and
/// reported `i64::MAX` again the next minute; the release then sat in CANARY_DEPLOYED
/// past its deadline, every tick failing, and the buttons answered 500.
async fn a_canary_reporting_i64_max_across_a_restart_is_still_decided(app: TestApp) {
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "v: 1\n").await;
    let canary = app.enroll("canary-1", &[("wave", "a")]).await;
    let steady = app.enroll("steady-1", &[("wave", "b")]).await;
    // Five minutes of ordinary traffic at v1 before the rollout: the throughput baseline.
    for minute in 1..=5 {
        for node in [&canary, &steady] {
            let resp = app
                .post_heartbeat(&node.node_token, running(&pipeline.id, 1, minute * 6_000))
                .await;
            assert_eq!(resp.status(), StatusCode::OK);
        }
        app.clock.advance_ms(MINUTE);
    }
    let gates = json!([{"healthWindow": {}}, {"throughputDrop": {"maxDropPercent": 50}}]);
    let (id, created) = app
        .create_release(json!({
            "pipeline_id": pipeline.id,
            "config_yaml": "v: 2\n",
            "changelog": "the jam",
            "rollout_plan": {"stages": [{
                "selector": {"labels": {"wave": "a"}}, "bakeSeconds": 120, "gates": gates
            }]},
        }))
        .await;
    let baseline = created["baseline_eps"]
        .as_f64()
        .expect("a baseline was recorded");
    assert!(baseline > 0.0, "{created}");
    let deadline = created["bake_deadline"].as_i64().unwrap();

    // The canary's counter: i64::MAX, a restart to 0, and i64::MAX again a minute later.
    for (after_ms, events_in) in [(0, i64::MAX), (10_000, 0), (MINUTE, i64::MAX)] {
        app.clock.advance_ms(after_ms);
        let resp = app
            .post_heartbeat(&canary.node_token, running(&pipeline.id, 2, events_in))
            .await;
        assert_eq!(resp.status(), StatusCode::OK, "eventsIn {events_in}");
        let resp = app
            .post_heartbeat(&steady.node_token, running(&pipeline.id, 1, 40_000))
            .await;
        assert_eq!(resp.status(), StatusCode::OK);
    }

    // Mid-bake the buttons read the same gate inputs: refused with a reason, never a 500.
    for endpoint in ["release.canary.advance", "release.canary.complete"] {
        let answer = app.call(endpoint, json!({ "release_id": id })).await;
        answered_with_a_reason(endpoint, &answer);
        assert_eq!(
            answer.0, 409,
            "{endpoint} before the deadline: {}",
            answer.1
        );
    }
    assert_eq!(app.release(&id).await["status"], "CANARY_DEPLOYED");

    // Past the deadline the scheduler decides: throughput rose, it did not drop.
    app.clock.advance_ms(deadline - app.now() + 1);
    let outcomes = releases::tick(&app.control, app.now()).await.unwrap();
    let decided: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.release_id == id)
        .map(|o| o.decision.as_str())
        .collect();
    assert_eq!(decided, ["complete"], "{outcomes:?}");
    let release = app.release(&id).await;
    assert_eq!(release["status"], "BROADENED", "{release}");
    let evaluations = release["stages"][0]["evaluations"].as_array().unwrap();
    let last = evaluations.last().expect("the scheduler's evaluation");
    let throughput = &last["results"][1];
    assert_eq!(throughput["gate"], "throughputDrop", "{last}");
    assert_eq!(throughput["verdict"], "pass", "{last}");
    assert_eq!(app.deployed_version(&pipeline.id).await, Some(2));

    // And the buttons on the decided release answer with a reason.
    for endpoint in ["release.canary.advance", "release.canary.complete"] {
        let answer = app.call(endpoint, json!({ "release_id": id })).await;
        answered_with_a_reason(endpoint, &answer);
        assert_eq!(answer.0, 409, "{endpoint} after the decision: {}", answer.1);
    }
}

#[tokio::test]
async fn a_canary_reporting_i64_max_across_a_restart_is_still_decided_on_sqlite() {
    a_canary_reporting_i64_max_across_a_restart_is_still_decided(TestApp::spawn().await).await;
}

#[tokio::test]
async fn a_canary_reporting_i64_max_across_a_restart_is_still_decided_on_postgres() {
    a_canary_reporting_i64_max_across_a_restart_is_still_decided(TestApp::spawn_postgres().await)
        .await;
}
