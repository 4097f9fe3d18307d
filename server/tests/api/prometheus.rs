//! The Prometheus servers the PromQL gate tests query. [`Prometheus`] is the real one
//! (Debian's `/usr/bin/prometheus`) on a free loopback port with its own storage and a
//! constant recording rule; [`FakePrometheus`] gives the answers a real Prometheus will not
//! give on demand (HTTP 500, NaN, an answer slower than the timeout) and records how it was
//! asked. Both stop when dropped.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::get;
use axum::Router;
use serde_json::json;
use vf_control::promql::PromSettings;
use vf_control::testing::TestDb;
use vf_server::Config;

use crate::helpers::TestApp;

pub const PROMETHEUS_BIN: &str = "/usr/bin/prometheus";
/// A recording rule the real Prometheus evaluates every second to [`ERROR_RATIO`]: a
/// one-sample vector, as a real error-ratio rule would give.
pub const ERROR_RATIO_RULE: &str = "vf_test_error_ratio";
pub const ERROR_RATIO: f64 = 0.02;

const CONFIG: &str =
    "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - RULES\n";
const RULES: &str = "groups:\n  - name: vf-test\n    interval: 1s\n    rules:\n      - record: vf_test_error_ratio\n        expr: vector(0.02)\n";
/// How long Prometheus gets to start and evaluate its rules once (100 ms polls).
const STARTUP_POLLS: u32 = 300;

/// A real Prometheus serving `url` until dropped.
pub struct Prometheus {
    pub url: String,
    child: Child,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus and returns once it is ready and [`ERROR_RATIO_RULE`] has a sample.
    pub async fn start() -> Prometheus {
        assert!(
            Path::new(PROMETHEUS_BIN).exists(),
            "{PROMETHEUS_BIN} is missing: run scripts/setup.sh"
        );
        // Another test may take the free port between probing and Prometheus binding it.
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("temp dir for Prometheus");
            let rules = dir.path().join("rules.yml");
            let config = dir.path().join("prometheus.yml");
            std::fs::write(&rules, RULES).unwrap();
            std::fs::write(
                &config,
                CONFIG.replace("RULES", &rules.display().to_string()),
            )
            .unwrap();
            let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
            let port = free_port();
            let child = Command::new(PROMETHEUS_BIN)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {PROMETHEUS_BIN}: {e}"));
            let mut prometheus = Prometheus {
                url: format!("http://127.0.0.1:{port}"),
                child,
                dir,
            };
            match prometheus.wait_until_serving().await {
                Ok(()) => return prometheus,
                Err(why) if prometheus.log().contains("address already in use") => {
                    eprintln!("Prometheus on port {port}: {why}; trying another port");
                }
                Err(why) => panic!("Prometheus did not start: {why}\n{}", prometheus.log()),
            }
        }
        panic!("Prometheus found no free port in three attempts");
    }

    /// Polls (bounded) until `/-/ready` answers and the recording rule has been evaluated.
    async fn wait_until_serving(&mut self) -> Result<(), String> {
        let client = reqwest::Client::new();
        for _ in 0..STARTUP_POLLS {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Err(format!("it exited with {status}"));
            }
            if self.rule_has_a_sample(&client).await {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!(
            "not ready within {} s",
            STARTUP_POLLS as u64 * 100 / 1000
        ))
    }

    async fn rule_has_a_sample(&self, client: &reqwest::Client) -> bool {
        let ready = client.get(format!("{}/-/ready", self.url)).send().await;
        if !ready.is_ok_and(|r| r.status().is_success()) {
            return false;
        }
        let Ok(resp) = client
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", ERROR_RATIO_RULE)])
            .send()
            .await
        else {
            return false;
        };
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        body["data"]["result"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listened on a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("probe a free port")
        .port()
}

/// A base URL on which nothing listens: connecting is refused.
/// Answers a good one-number sample to the first query of each text (the preflight when the
/// release is created), then whatever `answer` says: how a Prometheus that goes bad during
/// the bake looks.
pub fn after_preflight(
    answer: impl Fn(&str) -> Answer + Send + Sync + 'static,
) -> impl Fn(&str) -> Answer + Send + Sync + 'static {
    let seen = Mutex::new(std::collections::HashSet::new());
    move |query| {
        if seen.lock().unwrap().insert(query.to_string()) {
            Answer::sample("0")
        } else {
            answer(query)
        }
    }
}

pub fn unreachable_url() -> String {
    format!("http://127.0.0.1:{}", free_port())
}

/// Prometheus settings as the server reads them from `VF_PROMETHEUS_URL`,
/// `VF_PROMETHEUS_BEARER_TOKEN` and `VF_PROMETHEUS_TIMEOUT_MS`.
pub fn prometheus_settings(
    url: &str,
    token: Option<&str>,
    timeout_ms: Option<u64>,
) -> PromSettings {
    let vars = HashMap::from([
        ("VF_PROMETHEUS_URL", Some(url.to_string())),
        ("VF_PROMETHEUS_BEARER_TOKEN", token.map(str::to_string)),
        (
            "VF_PROMETHEUS_TIMEOUT_MS",
            timeout_ms.map(|t| t.to_string()),
        ),
    ]);
    Config::from_vars(|k| vars.get(k).cloned().flatten())
        .unwrap_or_else(|e| panic!("Prometheus settings: {e}"))
        .prometheus
        .expect("VF_PROMETHEUS_URL is set")
}

impl TestApp {
    /// On a temporary SQLite file, with customPromQL gates querying `url` (default timeout).
    pub async fn spawn_with_prometheus(url: &str, token: Option<&str>) -> TestApp {
        let settings = prometheus_settings(url, token, None);
        TestApp::spawn_with(TestDb::sqlite(), |c| c.prometheus = Some(settings)).await
    }
}

// --- the fake -------------------------------------------------------------------------

/// What the fake answers to one query.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// How long the fake waits before answering.
    pub delay: Duration,
}

impl Answer {
    pub fn new(status: u16, body: impl Into<String>) -> Answer {
        Answer {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// A successful one-sample vector whose value is `value` verbatim (`"NaN"`, `"high"`).
    pub fn sample(value: &str) -> Answer {
        let result = json!([{"metric": {"job": "edge"}, "value": [1_700_000_000.0, value]}]);
        let body = json!({"status": "success", "data": {"resultType": "vector", "result": result}});
        Answer::new(200, body.to_string())
    }

    /// Prometheus' error JSON with `status`.
    pub fn error(status: u16, error_type: &str, error: &str) -> Answer {
        let body = json!({"status": "error", "errorType": error_type, "error": error});
        Answer::new(status, body.to_string())
    }

    pub fn after(self, delay: Duration) -> Answer {
        Answer { delay, ..self }
    }
}

/// One request the fake received, as it arrived.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub path_and_query: String,
    pub authorization: Option<String>,
}

type Answers = Arc<dyn Fn(&str) -> Answer + Send + Sync>;

#[derive(Clone)]
struct FakeState {
    answer: Answers,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
}

/// `/api/v1/query` on a free loopback port, answering each query as told.
pub struct FakePrometheus {
    pub url: String,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    server: tokio::task::JoinHandle<()>,
}

impl FakePrometheus {
    /// Serves until dropped, answering the query `q` with `answer(q)`.
    pub async fn start(answer: impl Fn(&str) -> Answer + Send + Sync + 'static) -> FakePrometheus {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = FakeState {
            answer: Arc::new(answer),
            seen: seen.clone(),
        };
        let router = Router::new()
            .route("/api/v1/query", get(query))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        FakePrometheus { url, seen, server }
    }

    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// Asserts that queries arrived, each with `Authorization: Bearer <token>`, and that the
    /// token was nowhere in a URL.
    pub fn assert_token_sent_as_header_only(&self, token: &str) {
        let requests = self.requests();
        assert!(!requests.is_empty(), "Prometheus was never queried");
        for r in &requests {
            assert_eq!(
                r.authorization.as_deref(),
                Some(format!("Bearer {token}").as_str()),
                "{r:?}"
            );
            assert!(!r.path_and_query.contains(token), "token in the URL: {r:?}");
        }
    }
}

impl Drop for FakePrometheus {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn query(
    State(state): State<FakeState>,
    uri: Uri,
    headers: HeaderMap,
    Query(params): Query<HashMap<String, String>>,
) -> (StatusCode, String) {
    state.seen.lock().unwrap().push(SeenRequest {
        path_and_query: uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        authorization: headers
            .get(AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or("<not text>").to_string()),
    });
    let Some(q) = params.get("query") else {
        let body = Answer::error(400, "bad_data", "no query parameter").body;
        return (StatusCode::BAD_REQUEST, body);
    };
    let answer = (state.answer)(q);
    tokio::time::sleep(answer.delay).await;
    (StatusCode::from_u16(answer.status).unwrap(), answer.body)
}
