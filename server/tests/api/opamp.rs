//! OpAMP over plain HTTP against the real server: real protobuf over reqwest for the
//! transport rules, identity, status and every fencing case, and the real OpAMP client
//! from PyPI (`opentelemetry-opamp-client`, through `server/tests/opamp_harness.py`)
//! following a staged rollout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE};
use reqwest::StatusCode;
use serde_json::{json, Value};
use vf_control::fleet::{NodeRow, NodeStatus};
use vf_control::opamp::identity::InstanceUid;
use vf_control::opamp::prost::Message;
use vf_control::opamp::proto::{
    any_value, AgentCapabilities, AgentDescription, AgentDisconnect, AgentToServer, AnyValue,
    ComponentHealth, KeyValue, RemoteConfigStatus, RemoteConfigStatuses, ServerErrorResponseType,
    ServerToAgent, ServerToAgentFlags,
};
use vf_control::opamp::{store, transport};
use vf_control::releases::{self, CanaryRequest, Release};
use vf_control::testing::TestDb;
use vf_rules::Action;

use crate::helpers::{operator, TestApp, ENROLLMENT_TOKEN};

const V1: &str = "receivers:\n  otlp: {}\nexporters:\n  debug: {}\n";
const V2: &str = "receivers:\n  otlp: {}\nexporters:\n  debug: {verbosity: detailed}\n";
/// sha256 of nothing: the hash of the empty config map.
const EMPTY_HASH: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// What a collector that takes remote config and reports on it announces.
pub const CAPABILITIES: u64 = AgentCapabilities::ReportsStatus as u64
    | AgentCapabilities::AcceptsRemoteConfig as u64
    | AgentCapabilities::ReportsRemoteConfig as u64
    | AgentCapabilities::ReportsHealth as u64;

pub fn string_kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A simulated collector speaking OpAMP through raw HTTP, numbering its messages.
struct Collector {
    uid: Vec<u8>,
    seq: u64,
    description: AgentDescription,
}

impl Collector {
    fn new(name: &str, pairs: &[(&str, &str)]) -> Collector {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut uid = [0u8; 16];
        uid[..8].copy_from_slice(&NEXT.fetch_add(1, Ordering::SeqCst).to_be_bytes());
        for (i, b) in name.bytes().enumerate() {
            uid[8 + i % 8] ^= b;
        }
        let mut non_identifying = vec![string_kv("host.name", &format!("{name}.local"))];
        non_identifying.extend(pairs.iter().map(|(k, v)| string_kv(k, v)));
        Collector {
            uid: uid.to_vec(),
            seq: 0,
            description: AgentDescription {
                identifying_attributes: vec![string_kv("service.name", name)],
                non_identifying_attributes: non_identifying,
            },
        }
    }

    /// A message with only the uid, its sequence number and capabilities (a poll).
    fn poll_message(&self) -> AgentToServer {
        AgentToServer {
            instance_uid: self.uid.clone(),
            sequence_num: self.seq,
            capabilities: CAPABILITIES,
            ..AgentToServer::default()
        }
    }

    /// The full state: the poll plus the agent description.
    fn full_state(&self) -> AgentToServer {
        AgentToServer {
            agent_description: Some(self.description.clone()),
            ..self.poll_message()
        }
    }

    fn status(&self, hash: &[u8], status: RemoteConfigStatuses, error: &str) -> AgentToServer {
        AgentToServer {
            remote_config_status: Some(RemoteConfigStatus {
                last_remote_config_hash: hash.to_vec(),
                status: status as i32,
                error_message: error.into(),
            }),
            ..self.poll_message()
        }
    }

    async fn send(&mut self, app: &TestApp, message: AgentToServer) -> ServerToAgent {
        self.seq += 1;
        let reply = exchange(app, &message).await;
        assert_eq!(reply.instance_uid, self.uid, "the uid is echoed");
        assert!(reply.error_response.is_none(), "{reply:?}");
        reply
    }

    async fn connect(&mut self, app: &TestApp) -> ServerToAgent {
        let m = self.full_state();
        self.send(app, m).await
    }

    async fn poll(&mut self, app: &TestApp) -> ServerToAgent {
        let m = self.poll_message();
        self.send(app, m).await
    }

    /// Reports the offered config APPLIED; returns the answer to that report.
    async fn apply(&mut self, app: &TestApp, offer: &ServerToAgent) -> ServerToAgent {
        let hash = &offer
            .remote_config
            .as_ref()
            .expect("a config to apply")
            .config_hash;
        let m = self.status(hash, RemoteConfigStatuses::Applied, "");
        self.send(app, m).await
    }

    async fn agent(&self, app: &TestApp) -> store::AgentRow {
        let uid = InstanceUid::parse(&self.uid).unwrap();
        store::find_agent(&app.control.db, &uid)
            .await
            .unwrap()
            .expect("registered")
    }

    async fn node(&self, app: &TestApp) -> NodeRow {
        self.agent(app).await.node
    }
}

async fn post(app: &TestApp, body: Vec<u8>, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = app
        .client
        .post(format!("{}/v1/opamp", app.url))
        .header(AUTHORIZATION, format!("Bearer {ENROLLMENT_TOKEN}"))
        .header(CONTENT_TYPE, "application/x-protobuf");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(body).send().await.unwrap()
}

/// The body of a 200 answer, checked to be exactly `application/x-protobuf`.
async fn decode(resp: reqwest::Response) -> ServerToAgent {
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[CONTENT_TYPE], "application/x-protobuf");
    let gzipped = resp.headers().get(CONTENT_ENCODING).is_some();
    let bytes = resp.bytes().await.unwrap();
    let raw = if gzipped {
        transport::decode_body(Some("gzip"), &bytes, 1 << 24).unwrap()
    } else {
        bytes.to_vec()
    };
    ServerToAgent::decode(raw.as_slice()).unwrap()
}

async fn exchange(app: &TestApp, message: &AgentToServer) -> ServerToAgent {
    decode(post(app, message.encode_to_vec(), &[]).await).await
}

/// The offered config as name -> body; `None` when the answer offers no config.
fn offered(reply: &ServerToAgent) -> Option<BTreeMap<String, String>> {
    let remote = reply.remote_config.as_ref()?;
    let map = &remote.config.as_ref().expect("a config map").config_map;
    Some(
        map.iter()
            .map(|(name, file)| {
                assert_eq!(file.content_type, "text/yaml");
                (name.clone(), String::from_utf8(file.body.clone()).unwrap())
            })
            .collect(),
    )
}

fn config(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn asks_full_state(reply: &ServerToAgent) -> bool {
    reply.flags & ServerToAgentFlags::ReportFullState as u64 != 0
}

/// The node's status row for the pipeline as the fleet view shows it: (version, status).
async fn pipeline_status(app: &TestApp, node_id: &str, pipeline_id: &str) -> Option<(i64, String)> {
    app.node_view(node_id)
        .await
        .pipelines
        .into_iter()
        .find(|p| p.pipeline_id == pipeline_id)
        .map(|p| (p.version.unwrap_or(0), p.status))
}

/// A two-stage rollout: stage 1 the nodes labelled wave=one, stage 2 wave=two, 60 s bakes.
async fn two_stage_canary(app: &TestApp, pipeline_id: &str, config_yaml: &str) -> Release {
    let stage = |wave: &str| {
        json!({
            "selector": {"labels": {"wave": wave}},
            "bakeSeconds": 60,
            "gates": [{"healthWindow": {}}],
        })
    };
    releases::create_canary(
        &app.control,
        &operator(),
        CanaryRequest {
            pipeline_id: pipeline_id.to_string(),
            config_yaml: config_yaml.to_string(),
            changelog: "canary".into(),
            rollout_plan: Some(json!({"stages": [stage("one"), stage("two")]})),
            ..CanaryRequest::default()
        },
    )
    .await
    .unwrap()
}

/// A pipeline `edge-logs` deployed at v1 and two collectors running it: `canary`
/// (wave=one) and `steady` (wave=two).
async fn two_collectors_on_v1(app: &TestApp) -> (String, Collector, Collector) {
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    app.deploy(&pipeline.id, V1).await;
    let mut canary = Collector::new("canary", &[("wave", "one")]);
    let mut steady = Collector::new("steady", &[("wave", "two")]);
    for c in [&mut canary, &mut steady] {
        let reply = c.connect(app).await;
        assert_eq!(offered(&reply), config(&[("edge-logs", V1)]));
        let after = c.apply(app, &reply).await;
        assert_eq!(offered(&after), None, "an applied config is not sent again");
    }
    (pipeline.id, canary, steady)
}

// --- transport --------------------------------------------------------------------------

#[tokio::test]
async fn a_request_without_a_valid_enrollment_token_is_unauthorized() {
    let app = TestApp::spawn().await;
    let body = Collector::new("c", &[]).full_state().encode_to_vec();
    for auth in [
        None,
        Some("Bearer wrong-token-0123456789".to_string()),
        Some(format!("Basic {ENROLLMENT_TOKEN}")),
        Some("Bearer ".to_string()),
    ] {
        let mut req = app
            .client
            .post(format!("{}/v1/opamp", app.url))
            .header(CONTENT_TYPE, "application/x-protobuf")
            .body(body.clone());
        if let Some(value) = &auth {
            req = req.header(AUTHORIZATION, value);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{auth:?}");
    }
    let nodes = vf_control::fleet::list_nodes(&app.control.db, &app.env_id)
        .await
        .unwrap();
    assert!(nodes.is_empty(), "no node registers without a valid token");
}

#[tokio::test]
async fn a_body_that_does_not_decode_gets_a_bad_request_error_response_never_a_server_error() {
    let app = TestApp::spawn().await;
    // Not protobuf, a truncated message, and a "gzip" body that is not gzip.
    let cases = [
        (&b"\xff\xff\xff\xff\xff"[..], None),
        (&b"\x0a\x10truncated"[..], None),
        (&b"this is not gzip"[..], Some("gzip")),
    ];
    for (body, encoding) in cases {
        let headers: Vec<(&str, &str)> = encoding
            .map(|e| ("content-encoding", e))
            .into_iter()
            .collect();
        let reply = decode(post(&app, body.to_vec(), &headers).await).await;
        let error = reply.error_response.expect("an error response");
        assert_eq!(error.r#type, ServerErrorResponseType::BadRequest as i32);
        assert!(!error.error_message.is_empty());
        assert!(reply.remote_config.is_none());
    }
    // A well-formed message with a uid of the wrong length is a bad request too, and the
    // answer still echoes the uid it got.
    let bad_uid = AgentToServer {
        instance_uid: vec![7; 5],
        ..Collector::new("c", &[]).full_state()
    };
    let reply = exchange(&app, &bad_uid).await;
    assert_eq!(reply.instance_uid, vec![7; 5]);
    let error = reply.error_response.expect("an error response");
    assert_eq!(error.r#type, ServerErrorResponseType::BadRequest as i32);
    assert!(
        error.error_message.starts_with("instance_uid:"),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_media_type_is_parsed_in_any_case_with_parameters_and_others_are_refused() {
    let app = TestApp::spawn().await;
    let mut c = Collector::new("c", &[]);
    let resp = post(
        &app,
        c.full_state().encode_to_vec(),
        &[("content-type", "Application/X-Protobuf; charset=binary")],
    )
    .await;
    let reply = decode(resp).await;
    assert!(reply.error_response.is_none());
    c.seq += 1;

    let resp = app
        .client
        .post(format!("{}/v1/opamp", app.url))
        .bearer_auth(ENROLLMENT_TOKEN)
        .header(CONTENT_TYPE, "application/json")
        .body(c.poll_message().encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn gzip_requests_are_accepted_and_answers_are_gzipped_only_when_the_client_asks() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    app.deploy(&pipeline.id, V1).await;
    let mut c = Collector::new("gz", &[]);

    let body = transport::gzip(&c.full_state().encode_to_vec());
    let resp = post(
        &app,
        body,
        &[("content-encoding", "gzip"), ("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(resp.headers()[CONTENT_ENCODING], "gzip");
    let reply = decode(resp).await;
    assert_eq!(offered(&reply), config(&[("edge-logs", V1)]));
    c.seq += 1;

    let resp = post(
        &app,
        c.poll_message().encode_to_vec(),
        &[("accept-encoding", "identity")],
    )
    .await;
    assert!(resp.headers().get(CONTENT_ENCODING).is_none());
    let plain = decode(resp).await;
    assert_eq!(offered(&plain), config(&[("edge-logs", V1)]));
}

#[tokio::test]
async fn a_body_over_the_limit_once_decompressed_is_refused_with_413() {
    let app = TestApp::spawn().await;
    // 2 MiB of zeros compress to a few KiB; the limit (1 MiB) applies after inflating.
    let bomb = transport::gzip(&vec![0u8; 2 << 20]);
    assert!(bomb.len() < 16 * 1024);
    let resp = post(&app, bomb, &[(CONTENT_ENCODING.as_str(), "gzip")]).await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

// --- identity ---------------------------------------------------------------------------

#[tokio::test]
async fn first_contact_registers_an_otel_collector_node_from_its_description() {
    let app = TestApp::spawn().await;
    let mut c = Collector::new("otelcol-edge", &[("tier", "edge"), ("region", "eu")]);
    let reply = c.connect(&app).await;
    assert_eq!(
        reply.capabilities, 0b11,
        "AcceptsStatus | OffersRemoteConfig"
    );
    assert!(!asks_full_state(&reply));

    let node = c.node(&app).await;
    assert_eq!(node.kind, "otel-collector");
    assert_eq!(node.environment_id, app.env_id);
    assert_eq!(node.name, "otelcol-edge");
    assert_eq!(node.hostname, "otelcol-edge.local");
    assert_eq!(node.last_seen_at, Some(app.now()));
    assert_eq!(c.agent(&app).await.instance_uid, Some(hex(&c.uid)));
    let view = app.node_view(&node.id).await;
    assert_eq!(view.status, NodeStatus::Healthy);
    assert_eq!(view.labels["tier"], "edge");
    assert_eq!(view.labels["region"], "eu");
    assert_eq!(view.labels["service.name"], "otelcol-edge");

    // Operators' labels win over what the description reports, now and after it changes.
    app.set_operator_labels(&node.id, &[("tier", "canary")])
        .await;
    c.description
        .non_identifying_attributes
        .push(string_kv("tier", "core"));
    app.clock.advance_ms(1_000);
    c.connect(&app).await;
    let view = app.node_view(&node.id).await;
    assert_eq!(view.labels["tier"], "canary");
    assert_eq!(
        view.node.last_seen_at,
        Some(app.now()),
        "every message counts as contact"
    );
}

#[tokio::test]
async fn an_unknown_agent_without_a_description_is_asked_for_its_full_state_and_not_registered() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    app.deploy(&pipeline.id, V1).await;
    let mut c = Collector::new("shy", &[]);
    let reply = c.poll(&app).await;
    assert!(asks_full_state(&reply));
    assert_eq!(
        offered(&reply),
        None,
        "no config before the agent is identified"
    );
    let nodes = vf_control::fleet::list_nodes(&app.control.db, &app.env_id)
        .await
        .unwrap();
    assert!(nodes.is_empty());

    let reply = c.connect(&app).await;
    assert!(!asks_full_state(&reply));
    assert_eq!(offered(&reply), config(&[("edge-logs", V1)]));
}

#[tokio::test]
async fn a_sequence_gap_asks_for_the_full_state_and_withholds_config_until_it_arrives() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    app.deploy(&pipeline.id, V1).await;
    let mut c = Collector::new("gappy", &[]);
    let first = c.connect(&app).await;
    assert_eq!(offered(&first), config(&[("edge-logs", V1)]));
    // In sequence, not applied yet: the config is offered again.
    assert_eq!(offered(&c.poll(&app).await), config(&[("edge-logs", V1)]));

    c.seq += 3; // three messages lost
    let gap = c.poll(&app).await;
    assert!(asks_full_state(&gap));
    assert_eq!(offered(&gap), None);
    // The next one in sequence after the gap still lacks the description: still asked.
    let still = c.poll(&app).await;
    assert!(asks_full_state(&still));
    assert_eq!(offered(&still), None);

    let full = c.connect(&app).await;
    assert!(!asks_full_state(&full));
    assert_eq!(offered(&full), config(&[("edge-logs", V1)]));
    assert!(!asks_full_state(&c.poll(&app).await));
}

#[tokio::test]
async fn a_legacy_ulid_uid_is_the_same_agent_as_its_sixteen_bytes() {
    let app = TestApp::spawn().await;
    let mut legacy = Collector::new("legacy", &[]);
    legacy.uid = b"01ARZ3NDEKTSV4RRFFQ69G5FAV".to_vec();
    legacy.connect(&app).await;
    let node = legacy.node(&app).await;

    let mut modern = Collector::new("legacy", &[]);
    modern.uid = vec![
        0x01, 0x56, 0x3e, 0x3a, 0xb5, 0xd3, 0xd6, 0x76, 0x4c, 0x61, 0xef, 0xb9, 0x93, 0x02, 0xbd,
        0x5b,
    ];
    modern.seq = legacy.seq;
    let reply = modern.poll(&app).await;
    assert!(!asks_full_state(&reply), "same agent, next sequence number");
    assert_eq!(modern.node(&app).await.id, node.id);
    assert_eq!(
        legacy.agent(&app).await.instance_uid.as_deref(),
        Some("01563e3ab5d3d6764c61efb99302bd5b")
    );
}

#[tokio::test]
async fn agent_disconnect_marks_the_node_unreachable_at_once_until_it_speaks_again() {
    let app = TestApp::spawn().await;
    let mut c = Collector::new("leaving", &[]);
    c.connect(&app).await;
    let node = c.node(&app).await;
    assert_eq!(app.node_view(&node.id).await.status, NodeStatus::Healthy);

    let bye = AgentToServer {
        agent_disconnect: Some(AgentDisconnect {}),
        ..c.poll_message()
    };
    c.send(&app, bye).await;
    let view = app.node_view(&node.id).await;
    assert_eq!(view.status, NodeStatus::Unreachable);
    assert_eq!(view.node.disconnected_at, Some(app.now()));

    c.connect(&app).await;
    assert_eq!(app.node_view(&node.id).await.status, NodeStatus::Healthy);
}

#[tokio::test]
async fn a_uid_registered_in_one_environment_is_refused_with_another_environments_token() {
    let app = TestApp::spawn().await;
    let mut c = Collector::new("roamer", &[]);
    c.connect(&app).await;
    let other =
        vf_control::fleet::create_environment(&app.control.db, &operator(), "other", app.now())
            .await
            .unwrap();
    let token = "vfe_other-environment-token-0123";
    vf_control::fleet::create_enrollment_token(
        &app.control.db,
        &operator(),
        &other.id,
        Some(token),
        "t",
        app.now(),
    )
    .await
    .unwrap();
    let resp = app
        .client
        .post(format!("{}/v1/opamp", app.url))
        .bearer_auth(token)
        .header(CONTENT_TYPE, "application/x-protobuf")
        .body(c.full_state().encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}

// --- status -----------------------------------------------------------------------------

#[tokio::test]
async fn remote_config_status_and_health_become_the_nodes_pipeline_status() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    app.deploy(&pipeline.id, V1).await;
    let mut c = Collector::new("reporter", &[]);
    let offer = c.connect(&app).await;
    let hash = offer.remote_config.as_ref().unwrap().config_hash.clone();
    let node = c.node(&app).await;
    assert_eq!(pipeline_status(&app, &node.id, &pipeline.id).await, None);

    let m = c.status(&hash, RemoteConfigStatuses::Applying, "");
    let reply = c.send(&app, m).await;
    assert_eq!(
        offered(&reply),
        None,
        "the reported hash matches: nothing to resend"
    );
    assert_eq!(
        pipeline_status(&app, &node.id, &pipeline.id).await,
        Some((1, "STARTING".into()))
    );

    let m = AgentToServer {
        health: Some(ComponentHealth {
            healthy: true,
            ..ComponentHealth::default()
        }),
        ..c.status(&hash, RemoteConfigStatuses::Applied, "")
    };
    c.send(&app, m).await;
    let view = app.node_view(&node.id).await;
    let row = view
        .pipelines
        .iter()
        .find(|p| p.pipeline_id == pipeline.id)
        .unwrap();
    assert_eq!((row.version, row.status.as_str()), (Some(1), "RUNNING"));
    assert_eq!(row.events_in, 0, "collectors report no event counters");
    let v1 = vf_control::pipelines::get_version(&app.control.db, &pipeline.id, 1)
        .await
        .unwrap();
    assert_eq!(row.config_checksum.as_deref(), Some(v1.checksum.as_str()));
    assert_eq!(view.status, NodeStatus::Healthy);

    // Health changes alone (no status resent) still update the row.
    let m = AgentToServer {
        health: Some(ComponentHealth {
            healthy: false,
            last_error: "exporter otlp: connection refused".into(),
            ..ComponentHealth::default()
        }),
        ..c.poll_message()
    };
    c.send(&app, m).await;
    let view = app.node_view(&node.id).await;
    let row = view
        .pipelines
        .iter()
        .find(|p| p.pipeline_id == pipeline.id)
        .unwrap();
    assert_eq!(row.status, "CRASHED");
    assert_eq!(
        row.message.as_deref(),
        Some("exporter otlp: connection refused")
    );
    assert_eq!(view.status, NodeStatus::Degraded);
}

#[tokio::test]
async fn a_failed_config_is_recorded_and_not_resent_but_the_next_change_is() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    app.deploy(&pipeline.id, V1).await;
    let mut c = Collector::new("failing", &[]);
    let offer = c.connect(&app).await;
    let hash = offer.remote_config.as_ref().unwrap().config_hash.clone();

    let m = c.status(
        &hash,
        RemoteConfigStatuses::Failed,
        "unknown exporter \"debug\"",
    );
    let reply = c.send(&app, m).await;
    assert_eq!(
        offered(&reply),
        None,
        "no resend loop for a config that failed"
    );
    let node = c.node(&app).await;
    let view = app.node_view(&node.id).await;
    let row = view
        .pipelines
        .iter()
        .find(|p| p.pipeline_id == pipeline.id)
        .unwrap();
    assert_eq!((row.version, row.status.as_str()), (Some(1), "CRASHED"));
    assert_eq!(row.message.as_deref(), Some("unknown exporter \"debug\""));
    for _ in 0..3 {
        assert_eq!(offered(&c.poll(&app).await), None);
    }

    app.deploy(&pipeline.id, V2).await;
    let next = c.poll(&app).await;
    assert_eq!(offered(&next), config(&[("edge-logs", V2)]));
    c.apply(&app, &next).await;
    assert_eq!(
        pipeline_status(&app, &node.id, &pipeline.id).await,
        Some((2, "RUNNING".into()))
    );
}

// --- fencing ----------------------------------------------------------------------------

/// Targeted and held: the canary collector gets v2; the other stays on v1 and is offered
/// nothing new however often it polls.
async fn targeted_and_held_story(app: TestApp) {
    let (pipeline_id, mut canary, mut steady) = two_collectors_on_v1(&app).await;
    two_stage_canary(&app, &pipeline_id, V2).await;

    let offer = canary.poll(&app).await;
    assert_eq!(offered(&offer), config(&[("edge-logs", V2)]));
    canary.apply(&app, &offer).await;
    for _ in 0..3 {
        assert_eq!(offered(&steady.poll(&app).await), None, "held on v1");
    }
    let canary_node = canary.node(&app).await;
    let steady_node = steady.node(&app).await;
    assert_eq!(
        pipeline_status(&app, &canary_node.id, &pipeline_id).await,
        Some((2, "RUNNING".into()))
    );
    assert_eq!(
        pipeline_status(&app, &steady_node.id, &pipeline_id).await,
        Some((1, "RUNNING".into()))
    );

    // A node that joins mid-rollout is not targeted: it is held on v1 too.
    let mut late = Collector::new("late", &[("wave", "one")]);
    assert_eq!(
        offered(&late.connect(&app).await),
        config(&[("edge-logs", V1)])
    );
}

#[tokio::test]
async fn a_targeted_collector_gets_the_canary_and_an_untargeted_one_is_held_on_the_previous_version(
) {
    targeted_and_held_story(TestApp::spawn().await).await;
}

#[tokio::test]
async fn fencing_over_opamp_holds_on_postgresql_too() {
    targeted_and_held_story(TestApp::spawn_on(TestDb::postgres().await).await).await;
}

#[tokio::test]
async fn a_collector_reporting_failed_for_the_canary_hash_rolls_the_release_back_at_the_next_tick()
{
    let app = TestApp::spawn().await;
    let (pipeline_id, mut canary, mut steady) = two_collectors_on_v1(&app).await;
    let release = two_stage_canary(&app, &pipeline_id, V2).await;
    let offer = canary.poll(&app).await;
    let hash = offer.remote_config.as_ref().unwrap().config_hash.clone();
    let failed = canary.status(
        &hash,
        RemoteConfigStatuses::Failed,
        "unknown exporter \"debug\"",
    );
    canary.send(&app, failed).await;

    // The 60 s bake is far from over: the report itself fails the stage at the next tick.
    app.clock.advance_ms(1_000);
    let outcomes = releases::tick(&app.control, app.now()).await.unwrap();
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert_eq!(outcomes[0].decision.as_str(), "rollback");
    let rolled_back = releases::get_release(&app.control, &release.id)
        .await
        .unwrap();
    let failure = rolled_back.state.failure_reason.unwrap();
    assert_eq!(
        failure,
        "stage 1 failed during its bake: canaryCrash: canary reports v2 CRASHED: \
         unknown exporter \"debug\""
    );
    // The canary is offered the reverted config (v1's body as v3); the other collector
    // already runs that body, so it is offered nothing new.
    assert_eq!(
        offered(&canary.poll(&app).await),
        config(&[("edge-logs", V1)])
    );
    assert_eq!(offered(&steady.poll(&app).await), None);
}

#[tokio::test]
async fn an_untargeted_collector_gets_an_empty_config_while_a_first_deploy_is_withheld() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    let mut canary = Collector::new("canary", &[("wave", "one")]);
    // Nothing deployed yet: the pipeline is undeployed for everyone, so the offer is empty.
    let first = canary.connect(&app).await;
    assert_eq!(offered(&first), config(&[]));
    assert_eq!(
        hex(&first.remote_config.as_ref().unwrap().config_hash),
        EMPTY_HASH
    );
    canary.apply(&app, &first).await;

    two_stage_canary(&app, &pipeline.id, V1).await;
    let offer = canary.poll(&app).await;
    assert_eq!(offered(&offer), config(&[("edge-logs", V1)]));
    canary.apply(&app, &offer).await;

    // Joined after the release started, so not targeted, and there is no previous version:
    // the pipeline is withheld, which an empty config map says.
    let mut steady = Collector::new("steady", &[("wave", "two")]);
    let withheld = steady.connect(&app).await;
    assert_eq!(offered(&withheld), config(&[]));
    assert_eq!(
        hex(&withheld.remote_config.as_ref().unwrap().config_hash),
        EMPTY_HASH
    );
    let after = steady.apply(&app, &withheld).await;
    assert_eq!(offered(&after), None);
}

#[tokio::test]
async fn a_collector_served_nothing_is_not_sent_an_empty_config() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[("tier", "edge")]).await;
    app.deploy(&pipeline.id, V1).await;
    let mut core = Collector::new("core", &[("tier", "core")]);
    let reply = core.connect(&app).await;
    assert_eq!(
        offered(&reply),
        None,
        "not selected, and it runs nothing of ours"
    );

    // Selected, it runs the pipeline; deselected by an operator label, it is told to stop.
    let node = core.node(&app).await;
    app.set_operator_labels(&node.id, &[("tier", "edge")]).await;
    let offer = core.poll(&app).await;
    assert_eq!(offered(&offer), config(&[("edge-logs", V1)]));
    core.apply(&app, &offer).await;
    app.set_operator_labels(&node.id, &[("tier", "core")]).await;
    let stop = core.poll(&app).await;
    assert_eq!(offered(&stop), config(&[]));
    core.apply(&app, &stop).await;
    assert_eq!(
        pipeline_status(&app, &node.id, &pipeline.id)
            .await
            .map(|s| s.1),
        Some("STOPPED".into())
    );
}

#[tokio::test]
async fn after_completion_every_collector_converges_on_the_new_version() {
    let app = TestApp::spawn().await;
    let (pipeline_id, mut canary, mut steady) = two_collectors_on_v1(&app).await;
    let release = two_stage_canary(&app, &pipeline_id, V2).await;
    let offer = canary.poll(&app).await;
    canary.apply(&app, &offer).await;

    assert_eq!(app.decide_after(60_000).await, "advance");
    let offer = steady.poll(&app).await;
    assert_eq!(offered(&offer), config(&[("edge-logs", V2)]));
    steady.apply(&app, &offer).await;
    assert_eq!(app.decide_after(60_000).await, "complete");
    let done = releases::get_release(&app.control, &release.id)
        .await
        .unwrap();
    assert_eq!(done.state.status.as_str(), "BROADENED");

    // Out of flight: both already run the deployed version, nothing is resent; a new
    // collector gets it straight away.
    assert_eq!(offered(&canary.poll(&app).await), None);
    assert_eq!(offered(&steady.poll(&app).await), None);
    let mut fresh = Collector::new("fresh", &[("wave", "three")]);
    assert_eq!(
        offered(&fresh.connect(&app).await),
        config(&[("edge-logs", V2)])
    );
}

#[tokio::test]
async fn after_rollback_the_canary_collector_gets_the_reverted_config_and_the_held_one_nothing() {
    let app = TestApp::spawn().await;
    let (pipeline_id, mut canary, mut steady) = two_collectors_on_v1(&app).await;
    let release = two_stage_canary(&app, &pipeline_id, V2).await;
    let offer = canary.poll(&app).await;
    canary.apply(&app, &offer).await;

    releases::act(&app.control, &operator(), &release.id, Action::Rollback)
        .await
        .unwrap()
        .expect("the release reads");
    // The reverted config is version 3 with v1's body.
    let back = canary.poll(&app).await;
    assert_eq!(offered(&back), config(&[("edge-logs", V1)]));
    canary.apply(&app, &back).await;
    // The held collector already runs that exact config: nothing to send, and its status
    // now names the deployed version.
    assert_eq!(offered(&steady.poll(&app).await), None);
    let steady_node = steady.node(&app).await;
    let canary_node = canary.node(&app).await;
    assert_eq!(
        pipeline_status(&app, &steady_node.id, &pipeline_id).await,
        Some((3, "RUNNING".into()))
    );
    assert_eq!(
        pipeline_status(&app, &canary_node.id, &pipeline_id).await,
        Some((3, "RUNNING".into()))
    );
}

#[tokio::test]
async fn after_rolling_back_a_first_deploy_the_canary_collector_gets_an_empty_config() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    let mut canary = Collector::new("canary", &[("wave", "one")]);
    let first = canary.connect(&app).await;
    canary.apply(&app, &first).await;
    let release = two_stage_canary(&app, &pipeline.id, V1).await;
    let offer = canary.poll(&app).await;
    assert_eq!(offered(&offer), config(&[("edge-logs", V1)]));
    canary.apply(&app, &offer).await;

    releases::act(&app.control, &operator(), &release.id, Action::Rollback)
        .await
        .unwrap()
        .expect("the release reads");
    let undeployed = canary.poll(&app).await;
    assert_eq!(offered(&undeployed), config(&[]));
    canary.apply(&app, &undeployed).await;
    let node = canary.node(&app).await;
    assert_eq!(
        pipeline_status(&app, &node.id, &pipeline.id)
            .await
            .map(|s| s.1),
        Some("STOPPED".into())
    );
}

// --- the real OpAMP client --------------------------------------------------------------

/// The virtualenv's python with opentelemetry-opamp-client, installed on first use by
/// `scripts/opamp-client.sh` (idempotent).
fn opamp_python() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/opamp-client.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/opamp-client.sh");
    assert!(out.status.success(), "scripts/opamp-client.sh failed");
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(stdout.lines().last().expect("the venv's python").trim())
}

/// One harness process; dropping its stdin makes it disconnect and exit.
struct PythonCollector {
    child: tokio::process::Child,
    out: PathBuf,
}

impl PythonCollector {
    fn start(python: &Path, app: &TestApp, dir: &Path, name: &str, wave: &str) -> PythonCollector {
        let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/opamp_harness.py");
        let out = dir.join(format!("{name}.json"));
        let child = tokio::process::Command::new(python)
            .arg(harness)
            .args(["--endpoint", &format!("{}/v1/opamp", app.url)])
            .args(["--token", ENROLLMENT_TOKEN])
            .args(["--out", out.to_str().unwrap()])
            .args([
                "--service-name",
                name,
                "--host-name",
                &format!("{name}.local"),
            ])
            .args(["--label", &format!("wave={wave}")])
            .args(["--interval", "0.2", "--max-seconds", "90"])
            .stdin(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the OpAMP harness");
        PythonCollector { child, out }
    }

    fn state(&self) -> Value {
        std::fs::read_to_string(&self.out)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    }

    /// Waits (at most 30 s) until the harness's output satisfies `done`.
    async fn wait_for(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..600 {
            let state = self.state();
            if done(&state) {
                return state;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what}: timed out; harness state {}", self.state());
    }

    /// Waits until the last config received is `body` for `edge-logs` and it was applied.
    async fn wait_applied(&self, body: &str) -> Value {
        self.wait_for(&format!("apply {body:?}"), |s| {
            let Some(last) = s["received"].as_array().and_then(|r| r.last()) else {
                return false;
            };
            last["config"] == json!({ "edge-logs": body })
                && s["applied"]
                    .as_array()
                    .is_some_and(|a| a.contains(&last["hash"]))
        })
        .await
    }

    fn uid(&self) -> Vec<u8> {
        let hex = self.state()["instanceUid"].as_str().unwrap().to_string();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    async fn node(&self, app: &TestApp) -> NodeRow {
        let uid = InstanceUid::parse(&self.uid()).unwrap();
        store::find_agent(&app.control.db, &uid)
            .await
            .unwrap()
            .expect("registered")
            .node
    }

    /// Closes stdin: the harness sends AgentDisconnect and exits (at most 20 s).
    async fn stop(mut self) {
        drop(self.child.stdin.take());
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("the harness exits")
            .unwrap();
        assert!(status.success());
    }
}

/// Waits (at most 30 s) until the server shows the node's pipeline `status` at `version`:
/// the harness reports APPLIED in the background, after recording it.
async fn wait_status(app: &TestApp, node_id: &str, pipeline_id: &str, version: i64, status: &str) {
    let want = Some((version, status.to_string()));
    for _ in 0..600 {
        if pipeline_status(app, node_id, pipeline_id).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = pipeline_status(app, node_id, pipeline_id).await;
    panic!("node {node_id}: wanted {want:?}, the server shows {got:?}");
}

fn bodies(state: &Value) -> Vec<String> {
    state["received"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["config"]["edge-logs"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_opamp_client_follows_a_staged_rollout() {
    let python = opamp_python();
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[]).await;
    app.deploy(&pipeline.id, V1).await;
    let dir = tempfile::tempdir().unwrap();
    let one = PythonCollector::start(&python, &app, dir.path(), "py-one", "one");
    let two = PythonCollector::start(&python, &app, dir.path(), "py-two", "two");

    for c in [&one, &two] {
        let state = c.wait_applied(V1).await;
        assert_eq!(
            state["received"][0]["contentTypes"],
            json!({"edge-logs": "text/yaml"})
        );
        assert_eq!(state["errors"], json!([]));
    }
    let one_node = one.node(&app).await;
    let two_node = two.node(&app).await;
    assert_eq!(one_node.kind, "otel-collector");
    assert_eq!(one_node.name, "py-one");
    assert_eq!(app.node_view(&one_node.id).await.labels["wave"], "one");

    // Stage 1 opens for wave=one only.
    let release = two_stage_canary(&app, &pipeline.id, V2).await;
    one.wait_applied(V2).await;
    let seen = two.state()["messages"].as_u64().unwrap();
    let held = two
        .wait_for("keep polling", |s| {
            s["messages"].as_u64().unwrap_or(0) >= seen + 5
        })
        .await;
    assert_eq!(
        bodies(&held).last().map(String::as_str),
        Some(V1),
        "held on v1"
    );
    assert!(
        !bodies(&held).iter().any(|b| b == V2),
        "never offered the canary"
    );
    wait_status(&app, &one_node.id, &pipeline.id, 2, "RUNNING").await;
    wait_status(&app, &two_node.id, &pipeline.id, 1, "RUNNING").await;

    // The bake passes: stage 2 opens for wave=two, then the release completes.
    assert_eq!(app.decide_after(60_000).await, "advance");
    two.wait_applied(V2).await;
    // Proof of apply: the stage passes once the server has recorded wave two running v2.
    wait_status(&app, &two_node.id, &pipeline.id, 2, "RUNNING").await;
    assert_eq!(app.decide_after(60_000).await, "complete");
    let done = releases::get_release(&app.control, &release.id)
        .await
        .unwrap();
    assert_eq!(done.state.status.as_str(), "BROADENED");
    // Each client received each config once per change: no resend loop.
    let one_state = one.state();
    let distinct: std::collections::BTreeSet<_> = bodies(&one_state).into_iter().collect();
    assert_eq!(distinct.len(), 2, "{one_state}");
    wait_status(&app, &two_node.id, &pipeline.id, 2, "RUNNING").await;

    // Stopping a client sends AgentDisconnect: its node is offline at once.
    two.stop().await;
    assert_eq!(
        app.node_view(&two_node.id).await.status,
        NodeStatus::Unreachable
    );
    assert_eq!(
        app.node_view(&one_node.id).await.status,
        NodeStatus::Healthy
    );
    one.stop().await;
}
