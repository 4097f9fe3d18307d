//! Hostile bodies on `POST /v1/opamp`, over real HTTP and on the decoding path itself:
//! random bytes, valid messages with bytes overwritten, cut short or followed by garbage,
//! well-formed messages with random field values (uid lengths, sequence numbers, flags,
//! attributes, statuses), and gzip bodies that are garbage inside or outside. The server
//! answers 2xx or 4xx, never 5xx; a 200 is always a `ServerToAgent` echoing the uid of a
//! message that decoded; and a normal collector is still served afterwards.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use reqwest::header::{AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE};
use reqwest::StatusCode;
use vf_control::fleet::parse_labels;
use vf_control::opamp::identity::{agent_facts, InstanceUid};
use vf_control::opamp::prost::Message;
use vf_control::opamp::proto::{
    any_value, AgentConfigFile, AgentConfigMap, AgentDescription, AgentDisconnect, AgentToServer,
    AnyValue, ArrayValue, ComponentHealth, EffectiveConfig, KeyValue, KeyValueList,
    RemoteConfigStatus, ServerToAgent,
};
use vf_control::opamp::transport;

use crate::fuzz_support::{mangled, run_cases, runtime, text, Backend, Body, Tally};
use crate::helpers::{TestApp, ENROLLMENT_TOKEN};
use crate::opamp::{string_kv, CAPABILITIES};

/// The uid of the collector registered before the fuzzing, so generated messages also
/// reach a known agent (sequence tracking, status recording, the config offer).
const KNOWN_UID: [u8; 16] = *b"fuzz-known-agent";

/// The full state of the known collector: what a real one sends on connecting.
fn full_state(sequence_num: u64) -> AgentToServer {
    AgentToServer {
        instance_uid: KNOWN_UID.to_vec(),
        sequence_num,
        capabilities: CAPABILITIES,
        agent_description: Some(AgentDescription {
            identifying_attributes: vec![string_kv("service.name", "otelcol-fuzz")],
            non_identifying_attributes: vec![
                string_kv("host.name", "fuzz.local"),
                string_kv("tier", "edge"),
            ],
        }),
        health: Some(ComponentHealth {
            healthy: true,
            ..ComponentHealth::default()
        }),
        ..AgentToServer::default()
    }
}

fn attribute_key() -> BoxedStrategy<String> {
    prop_oneof![
        prop::sample::select(vec![
            "service.name",
            "host.name",
            "service.version",
            "os.type",
            "os.description",
            "tier",
        ])
        .prop_map(String::from),
        text(vec![]),
    ]
    .boxed()
}

/// Any attribute value, arrays and key-value lists nested a few levels.
fn any_value() -> BoxedStrategy<AnyValue> {
    let leaf = prop_oneof![
        text(vec![]).prop_map(any_value::Value::StringValue),
        any::<i64>().prop_map(any_value::Value::IntValue),
        any::<f64>().prop_map(any_value::Value::DoubleValue),
        any::<bool>().prop_map(any_value::Value::BoolValue),
        prop::collection::vec(any::<u8>(), 0..32).prop_map(any_value::Value::BytesValue),
    ]
    .prop_map(|v| AnyValue { value: Some(v) });
    let leaf = prop_oneof![1 => Just(AnyValue { value: None }), 6 => leaf];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|values| AnyValue {
                value: Some(any_value::Value::ArrayValue(ArrayValue { values })),
            }),
            prop::collection::vec((attribute_key(), prop::option::of(inner)), 0..4).prop_map(
                |kvs| AnyValue {
                    value: Some(any_value::Value::KvlistValue(KeyValueList {
                        values: kvs
                            .into_iter()
                            .map(|(key, value)| KeyValue { key, value })
                            .collect(),
                    })),
                }
            ),
        ]
    })
    .boxed()
}

fn attributes() -> BoxedStrategy<Vec<KeyValue>> {
    prop::collection::vec(
        (attribute_key(), prop::option::of(any_value()))
            .prop_map(|(key, value)| KeyValue { key, value }),
        0..8,
    )
    .boxed()
}

/// Instance uids of every length, 16 bytes (new agents, or the known one) and
/// 26-character ULID-looking strings (valid or not) most often.
fn instance_uid() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40),
        prop::collection::vec(any::<u8>(), 16),
        Just(KNOWN_UID.to_vec()),
        "[0-9A-Za-z]{26}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 26),
    ]
    .boxed()
}

fn number_u64() -> BoxedStrategy<u64> {
    prop_oneof![
        any::<u64>(),
        prop::sample::select(vec![
            0,
            1,
            2,
            i64::MAX as u64,
            i64::MAX as u64 + 1,
            u64::MAX - 1,
            u64::MAX
        ]),
    ]
    .boxed()
}

fn health() -> BoxedStrategy<ComponentHealth> {
    let one = (
        any::<bool>(),
        any::<u64>(),
        text(vec![]),
        text(vec![]),
        any::<u64>(),
    )
        .prop_map(|(healthy, start, last_error, status, at)| ComponentHealth {
            healthy,
            start_time_unix_nano: start,
            last_error,
            status,
            status_time_unix_nano: at,
            component_health_map: Default::default(),
        });
    (
        one.clone(),
        prop::collection::btree_map(text(vec![]), one, 0..3),
    )
        .prop_map(|(mut top, components)| {
            top.component_health_map = components;
            top
        })
        .boxed()
}

fn remote_config_status() -> BoxedStrategy<RemoteConfigStatus> {
    (
        prop::collection::vec(any::<u8>(), 0..64),
        prop_oneof![0..4i32, any::<i32>()],
        text(vec![]),
    )
        .prop_map(|(hash, status, error_message)| RemoteConfigStatus {
            last_remote_config_hash: hash,
            status,
            error_message,
        })
        .boxed()
}

fn effective_config() -> BoxedStrategy<EffectiveConfig> {
    prop::collection::btree_map(
        text(vec![]),
        (prop::collection::vec(any::<u8>(), 0..64), text(vec![]))
            .prop_map(|(body, content_type)| AgentConfigFile { body, content_type }),
        0..3,
    )
    .prop_map(|config_map| EffectiveConfig {
        config_map: Some(AgentConfigMap { config_map }),
    })
    .boxed()
}

/// A well-formed message whose every field is random.
fn random_message() -> BoxedStrategy<AgentToServer> {
    (
        (
            instance_uid(),
            number_u64(),
            prop_oneof![Just(CAPABILITIES), any::<u64>()],
            prop_oneof![3 => Just(0u64), 1 => Just(1u64), 1 => any::<u64>()],
        ),
        (
            prop::option::of((attributes(), attributes())),
            prop::option::of(health()),
            prop::option::of(remote_config_status()),
            prop::option::of(effective_config()),
            prop::bool::weighted(0.1),
        ),
    )
        .prop_map(
            |((uid, seq, capabilities, flags), (description, health, status, effective, bye))| {
                AgentToServer {
                    instance_uid: uid,
                    sequence_num: seq,
                    agent_description: description.map(|(identifying, other)| AgentDescription {
                        identifying_attributes: identifying,
                        non_identifying_attributes: other,
                    }),
                    capabilities,
                    health,
                    effective_config: effective,
                    remote_config_status: status,
                    agent_disconnect: bye.then_some(AgentDisconnect {}),
                    flags,
                }
            },
        )
        .boxed()
}

/// A request to `POST /v1/opamp`: its body, its `Content-Encoding`, and the message it
/// encodes when it is one (so the answer must echo its uid).
#[derive(Debug, Clone)]
struct Request {
    body: Body,
    encoding: Option<&'static str>,
    message: Option<AgentToServer>,
}

fn plain(bytes: Vec<u8>) -> Request {
    Request {
        body: Body(bytes),
        encoding: None,
        message: None,
    }
}

fn gzipped(bytes: &[u8]) -> Request {
    Request {
        body: Body(transport::gzip(bytes)),
        encoding: Some("gzip"),
        message: None,
    }
}

fn requests() -> BoxedStrategy<Request> {
    let valid = full_state(1).encode_to_vec();
    let encodings = prop::sample::select(vec!["gzip", "x-gzip", "GZIP", "identity", "gzip, gzip"]);
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..512).prop_map(plain),
        1 => mangled(valid.clone()).prop_map(plain),
        3 => random_message().prop_map(|m| Request {
            body: Body(m.encode_to_vec()),
            encoding: None,
            message: Some(m),
        }),
        1 => prop::collection::vec(any::<u8>(), 0..512).prop_map(|b| gzipped(&b)),
        1 => mangled(valid.clone()).prop_map(|b| gzipped(&b)),
        1 => random_message().prop_map(|m| Request {
            message: Some(m.clone()),
            ..gzipped(&m.encode_to_vec())
        }),
        // Bytes that claim to be gzip and are not, or a gzip stream with bytes overwritten.
        1 => (prop::collection::vec(any::<u8>(), 0..256), encodings)
            .prop_map(|(b, e)| Request { encoding: Some(e), ..plain(b) }),
        1 => mangled(transport::gzip(&valid)).prop_map(|b| Request {
            encoding: Some("gzip"),
            ..plain(b)
        }),
    ]
    .boxed()
}

async fn post(app: &TestApp, request: &Request) -> reqwest::Response {
    let mut req = app
        .client
        .post(format!("{}/v1/opamp", app.url))
        .header(AUTHORIZATION, format!("Bearer {ENROLLMENT_TOKEN}"))
        .header(CONTENT_TYPE, transport::PROTOBUF);
    if let Some(encoding) = request.encoding {
        req = req.header(CONTENT_ENCODING, encoding);
    }
    req.body(request.body.0.clone()).send().await.unwrap()
}

/// A 2xx or 4xx answer; a 200 is a `ServerToAgent` that echoes the message's uid.
async fn checked_answer(app: &TestApp, request: &Request) -> Result<StatusCode, TestCaseError> {
    let resp = post(app, request).await;
    let status = resp.status();
    let protobuf = resp
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v == transport::PROTOBUF);
    let bytes = resp.bytes().await.unwrap_or_default();
    prop_assert!(
        status.is_success() || status.is_client_error(),
        "{status} {:?} for {request:?}",
        String::from_utf8_lossy(&bytes)
    );
    if status == StatusCode::OK {
        prop_assert!(protobuf, "a 200 that is not protobuf for {request:?}");
        let reply = ServerToAgent::decode(bytes.as_ref());
        prop_assert!(reply.is_ok(), "{reply:?} for {request:?}");
        if let (Ok(reply), Some(message)) = (reply, &request.message) {
            prop_assert_eq!(&reply.instance_uid, &message.instance_uid);
        }
    }
    Ok(status)
}

/// The known collector still connects and is answered without an error.
async fn still_serves_a_collector(app: &TestApp) -> Result<(), TestCaseError> {
    let request = Request {
        message: Some(full_state(1)),
        ..plain(full_state(1).encode_to_vec())
    };
    let resp = post(app, &request).await;
    prop_assert_eq!(resp.status(), StatusCode::OK);
    let reply = ServerToAgent::decode(resp.bytes().await.unwrap_or_default().as_ref());
    prop_assert!(
        reply.as_ref().is_ok_and(|r| r.error_response.is_none()),
        "{reply:?}"
    );
    Ok(())
}

fn hostile_opamp_bodies_never_get_a_server_error(backend: Backend) {
    let rt = runtime();
    let app = rt.block_on(async {
        let app = backend.spawn().await;
        let pipeline = app.create_pipeline("otel", &[]).await;
        app.deploy(&pipeline.id, "receivers:\n  otlp: {}\n").await;
        still_serves_a_collector(&app).await.unwrap();
        app
    });

    let cases = backend.cases(1500);
    let name = format!("POST /v1/opamp on {backend:?}");
    let tally = Tally::default();
    let ran = run_cases(&name, cases, requests(), |request| {
        rt.block_on(async {
            tally.add(checked_answer(&app, &request).await?);
            // Every fifth case: a collector's exchange costs more than most cases.
            if tally.total() % 5 == 0 {
                still_serves_a_collector(&app).await?;
            }
            Ok(())
        })
    });
    println!("{name} answers: {tally}");
    assert_eq!(ran, cases);
    rt.block_on(still_serves_a_collector(&app)).unwrap();
}

#[test]
fn random_and_mangled_opamp_bodies_never_get_a_server_error() {
    hostile_opamp_bodies_never_get_a_server_error(Backend::Sqlite);
}

#[test]
fn random_and_mangled_opamp_bodies_never_get_a_server_error_on_postgres() {
    hostile_opamp_bodies_never_get_a_server_error(Backend::Postgres);
}

/// What the route does with a body before any database is involved: inflate (bounded),
/// decode, parse the uid, read the description. None of it may panic on any input.
fn decoding_path_holds(encoding: Option<&str>, bytes: &[u8]) -> Result<(), TestCaseError> {
    const LIMIT: usize = 64 * 1024;
    let Ok(raw) = transport::decode_body(encoding, bytes, LIMIT) else {
        return Ok(());
    };
    prop_assert!(raw.len() <= LIMIT);
    let Ok(message) = AgentToServer::decode(raw.as_slice()) else {
        return Ok(());
    };
    // What decoded encodes to a message that decodes to the same encoding.
    let encoded = message.encode_to_vec();
    let again = AgentToServer::decode(encoded.as_slice());
    prop_assert!(again.is_ok(), "{again:?}");
    prop_assert_eq!(
        again.map(|m| m.encode_to_vec()).unwrap_or_default(),
        encoded
    );

    let uid = InstanceUid::parse(&message.instance_uid);
    let len = message.instance_uid.len();
    prop_assert!(
        uid.is_err() || len == 16 || len == 26,
        "{len}-byte uid accepted"
    );
    if let (Ok(uid), Some(description)) = (uid, &message.agent_description) {
        prop_assert_eq!(uid.hex().len(), 32);
        let facts = agent_facts(description, &uid);
        for fact in [&facts.name, &facts.hostname] {
            prop_assert!(!fact.is_empty() && fact.len() <= 253, "{fact:?}");
            prop_assert!(!fact.chars().any(char::is_control), "{fact:?}");
        }
        prop_assert!(parse_labels("labels", facts.labels.clone()).is_ok());
    }
    Ok(())
}

#[test]
fn the_opamp_decoding_path_never_panics_on_random_or_mangled_bytes() {
    let valid = full_state(7).encode_to_vec();
    let inputs = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1024).prop_map(|b| (false, b)),
        mangled(valid.clone()).prop_map(|b| (false, b)),
        random_message().prop_map(|m| (false, m.encode_to_vec())),
        prop::collection::vec(any::<u8>(), 0..1024).prop_map(|b| (true, b)),
        prop::collection::vec(any::<u8>(), 0..1024).prop_map(|b| (true, transport::gzip(&b))),
        mangled(transport::gzip(&valid)).prop_map(|b| (true, b)),
        random_message().prop_map(|m| (true, transport::gzip(&m.encode_to_vec()))),
    ];

    let ran = run_cases("the OpAMP decoding path", 5000, inputs, |(gzip, bytes)| {
        decoding_path_holds(gzip.then_some("gzip"), &bytes)
    });
    assert_eq!(ran, 5000);
}
