//! Hostile bodies on the vf-agent routes, over real HTTP: thousands of generated bodies
//! (arbitrary JSON, a valid body with one field replaced, random bytes, a valid body with
//! bytes overwritten or cut short, bodies of the right shape with hostile values) are
//! answered 2xx or 4xx, never 5xx (SPEC section 4: "Never a 500 for client input"), and a
//! normal heartbeat is acknowledged after each.

use proptest::prelude::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::fuzz_support::{
    bodies, json, not_a_server_error, run_cases, runtime, text, Backend, Tally,
};
use crate::helpers::{TestApp, ENROLLMENT_TOKEN};

/// Label maps of hostile keys and values (empty, long, NUL, unicode, label-shaped).
fn label_map(known: Vec<String>) -> BoxedStrategy<Value> {
    let key = prop_oneof![
        2 => "[a-z][a-z0-9._/-]{0,10}",
        1 => text(known.clone()),
    ];
    prop::collection::btree_map(key, text(known), 0..5)
        .prop_map(|m| json!(m))
        .boxed()
}

/// A counter as the protocol sends it: a JSON number, whole or fractional, from anywhere in
/// i64's range or at its edges, or past it.
fn counter() -> BoxedStrategy<Value> {
    prop_oneof![
        2 => (0i64..1_000_000).prop_map(Value::from),
        1 => (-1e3f64..1e20).prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => prop::sample::select(vec![0, 1, i64::MAX, i64::MAX - 1, -1, i64::MIN])
            .prop_map(Value::from),
        1 => Just(Value::Null),
    ]
    .boxed()
}

/// An optional field: absent, or `value`.
fn maybe(value: BoxedStrategy<Value>) -> BoxedStrategy<Option<Value>> {
    prop::option::of(value).boxed()
}

/// Enrollments of the right shape: the real token or another, and hostile text and labels.
fn well_typed_enrollments(known: Vec<String>) -> BoxedStrategy<Value> {
    let words = || text(known.clone()).prop_map(Value::from).boxed();
    (
        prop_oneof![Just(ENROLLMENT_TOKEN.to_string()), text(known.clone())],
        text(known.clone()),
        maybe(words()),
        maybe(words()),
        maybe(words()),
        maybe(label_map(known.clone())),
    )
        .prop_map(|(token, hostname, os, agent, vector, labels)| {
            let mut body = json!({ "token": token, "hostname": hostname });
            for (name, value) in [
                ("os", os),
                ("agentVersion", agent),
                ("vectorVersion", vector),
                ("labels", labels),
            ] {
                if let Some(value) = value {
                    body[name] = value;
                }
            }
            body
        })
        .boxed()
}

/// Heartbeats of the right shape: up to four reports on the pipeline (or on ids nobody
/// has) with any counters, versions, statuses, logs, and hostile node facts and labels.
fn well_typed_heartbeats(pipeline_id: &str, known: Vec<String>) -> BoxedStrategy<Value> {
    let words = || text(known.clone()).prop_map(Value::from).boxed();
    let report = (
        (
            prop_oneof![3 => Just(pipeline_id.to_string()), 1 => text(known.clone())],
            prop_oneof![3 => 1i64..4, 1 => any::<i64>()],
            text(known.clone()),
        ),
        prop::collection::vec(maybe(counter()), 8),
        (
            maybe(words()),
            maybe(
                prop::collection::vec(text(known.clone()), 0..25)
                    .prop_map(|l| json!(l))
                    .boxed(),
            ),
        ),
    )
        .prop_map(|((id, version, status), counters, (checksum, logs))| {
            let mut r = json!({ "pipelineId": id, "version": version, "status": status });
            let names = COUNTER_FIELDS.iter().chain(["uptimeSeconds", "pid"].iter());
            for (name, value) in names.zip(counters) {
                if let Some(value) = value {
                    r[*name] = value;
                }
            }
            for (name, value) in [("configChecksum", checksum), ("recentLogs", logs)] {
                if let Some(value) = value {
                    r[name] = value;
                }
            }
            r
        });
    let host_metrics = json(known.clone())
        .prop_map(|j| serde_json::from_str::<Value>(&j.render()).unwrap_or(Value::Null))
        .boxed();
    (
        prop::collection::vec(report, 0..4),
        maybe(words()),
        maybe(words()),
        maybe(label_map(known.clone())),
        maybe(host_metrics),
    )
        .prop_map(|(reports, agent, vector, labels, host)| {
            let mut body = json!({ "pipelines": reports });
            for (name, value) in [
                ("agentVersion", agent),
                ("vectorVersion", vector),
                ("labels", labels),
                ("hostMetrics", host),
            ] {
                if let Some(value) = value {
                    body[name] = value;
                }
            }
            body
        })
        .boxed()
}

/// The cumulative counters of a pipeline report.
pub const COUNTER_FIELDS: [&str; 6] = [
    "eventsIn",
    "eventsOut",
    "errorsTotal",
    "eventsDiscarded",
    "bytesIn",
    "bytesOut",
];

/// A complete heartbeat on `pipeline_id`, every field set.
fn valid_heartbeat(pipeline_id: &str) -> Value {
    json!({
        "pipelines": [{
            "pipelineId": pipeline_id, "version": 1, "status": "RUNNING",
            "eventsIn": 10, "eventsOut": 9, "errorsTotal": 1, "eventsDiscarded": 0,
            "bytesIn": 1000, "bytesOut": 900, "uptimeSeconds": 60.25, "pid": 4242,
            "configChecksum": "abc123", "recentLogs": ["started"]
        }],
        "agentVersion": "1.2.3",
        "vectorVersion": "0.40.0",
        "labels": { "tier": "edge" },
        "hostMetrics": { "loadAvg1": 0.5, "memoryUsedBytes": 1024 },
        "agentHealth": { "uptimeSeconds": 0.117464567, "pushConnected": true }
    })
}

/// The server still acknowledges a normal heartbeat of `node_token`.
async fn still_acknowledges_a_heartbeat(
    app: &TestApp,
    node_token: &str,
    pipeline_id: &str,
) -> Result<(), TestCaseError> {
    let resp = app
        .post_heartbeat(node_token, valid_heartbeat(pipeline_id).to_string())
        .await;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    prop_assert_eq!(
        status,
        StatusCode::OK,
        "a valid heartbeat afterwards: {}",
        text
    );
    Ok(())
}

/// Values of this server a body may carry: the pipeline's id and the enrollment token.
fn known(pipeline_id: &str) -> Vec<String> {
    vec![pipeline_id.to_string(), ENROLLMENT_TOKEN.to_string()]
}

const WRONG_TOKEN: &str = "vfn_0000000000000000000000000000000000000000";

fn hostile_enrollments_never_get_a_server_error(backend: Backend) {
    let rt = runtime();
    let (app, node, pipeline) = rt.block_on(async {
        let app = backend.spawn().await;
        let pipeline = app.create_pipeline("logs", &[]).await;
        let node = app.enroll("edge-1", &[]).await;
        (app, node, pipeline)
    });
    let valid = json!({
        "token": ENROLLMENT_TOKEN, "hostname": "fuzz-1", "os": "linux",
        "agentVersion": "1.2.3", "vectorVersion": "0.40.0", "labels": { "tier": "edge" }
    });
    let cases = backend.cases(1000);

    let tally = Tally::default();
    let name = format!("POST /api/agent/enroll on {backend:?}");
    let ran = run_cases(
        &name,
        cases,
        bodies(
            valid,
            known(&pipeline.id),
            well_typed_enrollments(known(&pipeline.id)),
        ),
        |body| {
            rt.block_on(async {
                let resp = app.post_enroll(body.0.clone()).await;
                tally.add(not_a_server_error(resp, &body).await?);
                still_acknowledges_a_heartbeat(&app, &node.node_token, &pipeline.id).await
            })
        },
    );
    println!("{name} answers: {tally}");
    assert_eq!(ran, cases);
}

#[test]
fn random_json_and_mangled_bodies_on_enroll_never_get_a_server_error() {
    hostile_enrollments_never_get_a_server_error(Backend::Sqlite);
}

#[test]
fn random_json_and_mangled_bodies_on_enroll_never_get_a_server_error_on_postgres() {
    hostile_enrollments_never_get_a_server_error(Backend::Postgres);
}

/// The two routes taking a heartbeat body.
#[derive(Debug, Clone, Copy)]
enum Route {
    Heartbeat,
    ConfigPost,
}

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Heartbeat => "POST /api/agent/heartbeat",
            Route::ConfigPost => "POST /api/agent/config",
        }
    }
}

/// The heartbeat and config-poll properties: a node's token (or a wrong one, always 401)
/// and a hostile body.
fn hostile_reports_never_get_a_server_error(route: Route, backend: Backend) {
    let rt = runtime();
    let (app, node, pipeline) = rt.block_on(async {
        let app = backend.spawn().await;
        let pipeline = app.create_pipeline("logs", &[]).await;
        app.deploy(&pipeline.id, "sources: {}\n").await;
        let node = app.enroll("edge-1", &[]).await;
        (app, node, pipeline)
    });
    let strategy = (
        prop::bool::weighted(0.85),
        bodies(
            valid_heartbeat(&pipeline.id),
            known(&pipeline.id),
            well_typed_heartbeats(&pipeline.id, known(&pipeline.id)),
        ),
    );
    let cases = backend.cases(1000);

    let tally = Tally::default();
    let name = format!("{} on {backend:?}", route.name());
    let ran = run_cases(&name, cases, strategy, |(right_token, body)| {
        rt.block_on(async {
            let token = if right_token {
                node.node_token.as_str()
            } else {
                WRONG_TOKEN
            };
            let resp = match route {
                Route::Heartbeat => app.post_heartbeat(token, body.0.clone()).await,
                Route::ConfigPost => app.post_config(token, body.0.clone()).await,
            };
            let status = not_a_server_error(resp, &body).await?;
            tally.add(status);
            if !right_token {
                prop_assert_eq!(status, StatusCode::UNAUTHORIZED);
            }
            still_acknowledges_a_heartbeat(&app, &node.node_token, &pipeline.id).await
        })
    });
    println!("{name} answers: {tally}");
    assert_eq!(ran, cases);
}

#[test]
fn random_json_and_mangled_bodies_on_heartbeat_never_get_a_server_error() {
    hostile_reports_never_get_a_server_error(Route::Heartbeat, Backend::Sqlite);
}

#[test]
fn random_json_and_mangled_bodies_on_heartbeat_never_get_a_server_error_on_postgres() {
    hostile_reports_never_get_a_server_error(Route::Heartbeat, Backend::Postgres);
}

#[test]
fn random_json_and_mangled_bodies_on_config_post_never_get_a_server_error() {
    hostile_reports_never_get_a_server_error(Route::ConfigPost, Backend::Sqlite);
}

#[test]
fn random_json_and_mangled_bodies_on_config_post_never_get_a_server_error_on_postgres() {
    hostile_reports_never_get_a_server_error(Route::ConfigPost, Backend::Postgres);
}
