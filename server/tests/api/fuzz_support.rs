//! What the fuzz properties share: generators of hostile JSON, bytes and bodies, one
//! runtime per property, a runner that counts its cases and shrinks a failure to its
//! smallest input, and the never-a-5xx check of an answer.
//!
//! One runtime and one [`TestApp`] serve every case of a property: the cases run through
//! proptest's [`TestRunner`] with `block_on` each, so thousands of them take seconds.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::{Response, StatusCode};
use serde_json::Value;
use tokio::runtime::Runtime;

use crate::helpers::TestApp;

/// A JSON document as a client writes it. Numbers are literals, so they can be anything
/// JSON's grammar allows (`1e400`, forty digits, `-0`), not only what an `f64` holds; an
/// object may repeat a key.
#[derive(Debug, Clone)]
pub enum Json {
    Null,
    Bool(bool),
    Number(String),
    Text(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn from_value(v: &Value) -> Json {
        match v {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(n.to_string()),
            Value::String(s) => Json::Text(s.clone()),
            Value::Array(items) => Json::Array(items.iter().map(Json::from_value).collect()),
            Value::Object(fields) => Json::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), Json::from_value(v)))
                    .collect(),
            ),
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(n),
            Json::Text(s) => out.push_str(&Value::from(s.as_str()).to_string()),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Object(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(k.as_str()).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }

    /// How many values the document holds, itself included.
    pub fn size(&self) -> usize {
        1 + match self {
            Json::Array(items) => items.iter().map(Json::size).sum(),
            Json::Object(fields) => fields.iter().map(|(_, v)| v.size()).sum(),
            _ => 0,
        }
    }

    /// The document with its `target`-th value (pre-order; 0 is the document) replaced.
    pub fn replaced(&self, target: usize, with: &Json) -> Json {
        fn go(j: &Json, target: usize, next: &mut usize, with: &Json) -> Json {
            let me = *next;
            *next += 1;
            if me == target {
                return with.clone();
            }
            match j {
                Json::Array(items) => {
                    Json::Array(items.iter().map(|i| go(i, target, next, with)).collect())
                }
                Json::Object(fields) => Json::Object(
                    fields
                        .iter()
                        .map(|(k, v)| (k.clone(), go(v, target, next, with)))
                        .collect(),
                ),
                other => other.clone(),
            }
        }
        go(self, target, &mut 0, with)
    }
}

/// A request body, shown as (lossy) text when a case fails.
#[derive(Clone)]
pub struct Body(pub Vec<u8>);

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bytes: {:?}",
            self.0.len(),
            String::from_utf8_lossy(&self.0)
        )
    }
}

/// The field names of the vf-agent protocol, so generated objects often hit real fields.
const FIELDS: &[&str] = &[
    "token",
    "hostname",
    "os",
    "agentVersion",
    "vectorVersion",
    "labels",
    "pipelines",
    "pipelineId",
    "version",
    "status",
    "eventsIn",
    "eventsOut",
    "errorsTotal",
    "eventsDiscarded",
    "bytesIn",
    "bytesOut",
    "uptimeSeconds",
    "pid",
    "configChecksum",
    "recentLogs",
    "hostMetrics",
];

/// Number literals at the edges: around i64 and u64, beyond f64, negative zero, subnormal.
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1.5",
    "-1.5",
    "1E+2",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "1e19",
    "1e308",
    "-1e308",
    "1e309",
    "1e400",
    "-1e400",
    "5e-324",
    "1e-400",
    "123456789012345678901234567890123456789",
    "0.000000000000000000000000000001",
];

/// Text at the edges (NUL, other controls, right-to-left override, emoji, BOM, the last
/// code point, long strings) plus `known` values of this server (ids, tokens), arbitrary
/// unicode and label-shaped words.
pub fn text(known: Vec<String>) -> BoxedStrategy<String> {
    let mut special: Vec<String> = [
        "",
        " ",
        "\u{0}",
        "edge\u{0}1",
        "\u{202E}txt.exe",
        "مرحبا بالعالم",
        "שָׁלוֹם",
        "😀🚀🔥👩‍👩‍👧",
        "RUNNING",
        "\u{FEFF}bom",
        "\\",
        "\"",
        "\u{7f}",
        "\n\t\r",
        "\u{10FFFF}",
        "\u{FFFD}",
    ]
    .map(String::from)
    .to_vec();
    special.push("x".repeat(300));
    special.push("é".repeat(200));
    special.extend(known);
    prop_oneof![
        3 => any::<String>(),
        2 => "[a-zA-Z0-9._/-]{0,16}",
        3 => prop::sample::select(special),
    ]
    .boxed()
}

fn number() -> BoxedStrategy<String> {
    let finite = || any::<f64>().prop_filter("JSON has no NaN or infinity", |f| f.is_finite());
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        finite().prop_map(|f| format!("{f:e}")),
        finite().prop_map(|f| format!("{f}")),
        prop::sample::select(NUMBERS).prop_map(String::from),
    ]
    .boxed()
}

/// Arbitrary JSON up to five levels deep; object keys are mostly the protocol's own.
pub fn json(known: Vec<String>) -> BoxedStrategy<Json> {
    let words = text(known);
    let key = prop_oneof![
        2 => prop::sample::select(FIELDS).prop_map(String::from),
        1 => words.clone(),
    ]
    .boxed();
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number().prop_map(Json::Number),
        words.prop_map(Json::Text),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(Json::Object),
        ]
    })
    .boxed()
}

/// `valid` with a few bytes overwritten, maybe cut short, maybe with garbage appended.
pub fn mangled(valid: Vec<u8>) -> BoxedStrategy<Vec<u8>> {
    (
        prop::collection::vec((any::<Index>(), any::<u8>()), 0..6),
        prop::option::of(any::<Index>()),
        prop::collection::vec(any::<u8>(), 0..8),
    )
        .prop_map(move |(writes, cut, garbage)| {
            let mut bytes = valid.clone();
            for (at, byte) in writes {
                if !bytes.is_empty() {
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                }
            }
            if let Some(cut) = cut {
                bytes.truncate(cut.index(bytes.len() + 1));
            }
            bytes.extend(garbage);
            bytes
        })
        .boxed()
}

/// The kinds of hostile body for a route whose valid body is `valid`: arbitrary JSON, the
/// valid body with one value replaced by arbitrary JSON, random bytes, the valid body's
/// bytes mangled, and `well_typed` (bodies of the right shape with hostile values, which
/// get past parsing to the checks and the database).
pub fn bodies(
    valid: Value,
    known: Vec<String>,
    well_typed: BoxedStrategy<Value>,
) -> BoxedStrategy<Body> {
    let document = Json::from_value(&valid);
    let size = document.size();
    assert!(size > 1, "a valid body has fields to replace");
    prop_oneof![
        well_typed.prop_map(|v| Body(v.to_string().into_bytes())),
        json(known.clone()).prop_map(|j| Body(j.render().into_bytes())),
        (any::<Index>(), json(known)).prop_map(move |(at, with)| {
            let field = 1 + at.index(size - 1);
            Body(document.replaced(field, &with).render().into_bytes())
        }),
        prop::collection::vec(any::<u8>(), 0..256).prop_map(Body),
        mangled(valid.to_string().into_bytes()).prop_map(Body),
    ]
    .boxed()
}

/// How many answers of each status a property got, to show the cases reached the server's
/// checks (not only its JSON parser).
#[derive(Default)]
pub struct Tally(RefCell<BTreeMap<u16, u32>>);

impl Tally {
    pub fn add(&self, status: StatusCode) {
        *self.0.borrow_mut().entry(status.as_u16()).or_default() += 1;
    }

    pub fn total(&self) -> u32 {
        self.0.borrow().values().sum()
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts: Vec<String> = self
            .0
            .borrow()
            .iter()
            .map(|(status, n)| format!("{n} x {status}"))
            .collect();
        write!(f, "{}", counts.join(", "))
    }
}

/// One runtime for a whole property: the server's tasks run while a case is driven.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Runs `cases` cases of `strategy` through `check` (shrinking a failure to its smallest
/// input) and prints how many ran; panics with the minimal failing input.
pub fn run_cases<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> u32 {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let ran = Cell::new(0u32);
    let started = Instant::now();
    let outcome = runner.run(&strategy, |value| {
        ran.set(ran.get() + 1);
        check(value)
    });
    if let Err(e) = outcome {
        panic!("{name}: {e}");
    }
    println!("{name}: {} cases in {:?}", ran.get(), started.elapsed());
    ran.get()
}

/// The answer is 2xx or 4xx, and a 400 carries a JSON `{"error": ...}` message.
pub async fn not_a_server_error(resp: Response, body: &Body) -> Result<StatusCode, TestCaseError> {
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    prop_assert!(
        status.is_success() || status.is_client_error(),
        "{status} {text} for {body:?}"
    );
    if status == StatusCode::BAD_REQUEST {
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_default();
        prop_assert!(!message.is_empty(), "400 without a message: {text}");
    }
    Ok(status)
}

/// Where a property's server keeps its data. SQLite runs the full count; PostgreSQL, which
/// refuses text SQLite stores (NUL), a smaller one.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub async fn spawn(self) -> TestApp {
        match self {
            Backend::Sqlite => TestApp::spawn().await,
            Backend::Postgres => TestApp::spawn_postgres().await,
        }
    }

    pub fn cases(self, on_sqlite: u32) -> u32 {
        match self {
            Backend::Sqlite => on_sqlite,
            Backend::Postgres => on_sqlite / 5,
        }
    }
}
