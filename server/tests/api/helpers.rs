//! [`TestApp`]: the server on port 0 with its own database, a manual clock and a bootstrap
//! environment "test" with a known enrollment token. Operator actions go through
//! `vf-control`, agent traffic through raw HTTP or a real `vf_agent::Agent`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, IF_NONE_MATCH};
use reqwest::{Response, StatusCode};
use vf_agent::protocol::{EnrollRequest, EnrollResponse};
use vf_agent::{Agent, AgentOptions, SimSettings};
use vf_control::fleet::{self, NodeView};
use vf_control::heartbeat::{self, MinuteRow};
use vf_control::pipelines::{self, PipelineRow, VersionRow};
use vf_control::testing::TestDb;
use vf_control::{Actor, Clock, Control, ManualClock};
use vf_server::Config;

/// The bootstrap environment every test app starts with.
pub const ENVIRONMENT: &str = "test";
/// Its enrollment token (`VF_BOOTSTRAP_ENROLLMENT_TOKEN`).
pub const ENROLLMENT_TOKEN: &str = "vfe_test-enrollment-token-0123456789";
/// An admin API token of every environment (`VF_BOOTSTRAP_API_TOKEN`); [`TestApp::client`]
/// sends it with every request, as automation does.
pub const API_TOKEN: &str = "vfa_test-admin-api-token-0123456789";
/// The actor the audit log records for calls made with [`API_TOKEN`].
pub const OPERATOR: &str = "token:bootstrap";

/// The actor of operator actions tests make through `vf-control` directly.
pub fn operator() -> Actor {
    Actor {
        name: OPERATOR.to_string(),
        ip: None,
    }
}

/// Where the manual clock starts: a whole minute, so per-minute buckets are easy to name.
pub const T0: i64 = 1_700_000_040_000;
pub const MINUTE: i64 = 60_000;

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `Config::for_tests` plus the bootstrap environment and enrollment token.
pub fn test_config(database_url: &str) -> Config {
    let mut config = Config::for_tests(database_url);
    config.bootstrap_environment = Some(ENVIRONMENT.to_string());
    config.bootstrap_enrollment_token = Some(ENROLLMENT_TOKEN.to_string());
    config.bootstrap_api_token = Some(API_TOKEN.to_string());
    config
}

/// A client that authenticates every request with `token` (agent routes set their own).
pub fn client_with_token(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
        .expect("token is a header value");
    headers.insert(AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("http client")
}

pub struct TestApp {
    pub url: String,
    pub control: Control,
    pub clock: ManualClock,
    pub client: reqwest::Client,
    pub env_id: String,
    /// Keeps the database alive (a SQLite file is deleted on drop).
    pub db: TestDb,
    pub agents_dir: tempfile::TempDir,
}

impl TestApp {
    /// On a temporary SQLite file.
    pub async fn spawn() -> TestApp {
        Self::spawn_on(TestDb::sqlite()).await
    }

    /// On a fresh PostgreSQL database (needs `VF_TEST_POSTGRES_URL`; panics without it).
    pub async fn spawn_postgres() -> TestApp {
        Self::spawn_on(TestDb::postgres().await).await
    }

    pub async fn spawn_on(db: TestDb) -> TestApp {
        Self::spawn_with(db, |_| {}).await
    }

    /// On `db`, with [`test_config`] changed by `configure` first (e.g. a Prometheus).
    pub async fn spawn_with(db: TestDb, configure: impl FnOnce(&mut Config)) -> TestApp {
        let clock = ManualClock::new(T0);
        let mut config = test_config(&db.url);
        configure(&mut config);
        let app = vf_server::build_with_clock(config, Arc::new(clock.clone()))
            .await
            .expect("build the application");
        let control = app.control.clone();
        let url = app.spawn();
        let env_id = fleet::list_environments(&control.db)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.name == ENVIRONMENT)
            .expect("the bootstrap environment exists")
            .id;
        TestApp {
            url,
            control,
            clock,
            client: client_with_token(API_TOKEN),
            env_id,
            db,
            agents_dir: tempfile::tempdir().expect("temp dir for agents"),
        }
    }

    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    // --- operator actions -------------------------------------------------------------

    pub async fn create_pipeline(&self, name: &str, node_selector: &[(&str, &str)]) -> PipelineRow {
        pipelines::create_pipeline(
            &self.control.db,
            &operator(),
            &self.env_id,
            name,
            labels(node_selector),
            self.now(),
        )
        .await
        .unwrap()
    }

    /// A direct deploy: `config_yaml` becomes the next version and the deployed one.
    pub async fn deploy(&self, pipeline_id: &str, config_yaml: &str) -> VersionRow {
        pipelines::deploy(
            &self.control.db,
            &operator(),
            pipeline_id,
            config_yaml,
            "test deploy",
            self.now(),
        )
        .await
        .unwrap()
    }

    pub async fn set_operator_labels(&self, node_id: &str, pairs: &[(&str, &str)]) {
        fleet::set_operator_labels(
            &self.control.db,
            &operator(),
            node_id,
            labels(pairs),
            self.now(),
        )
        .await
        .unwrap();
    }

    /// The node as the fleet view shows it now.
    pub async fn node_view(&self, node_id: &str) -> NodeView {
        fleet::fleet(&self.control.db, &self.env_id, self.now())
            .await
            .unwrap()
            .into_iter()
            .find(|n| n.node.id == node_id)
            .expect("node in the fleet view")
    }

    /// Every per-minute aggregate of the pipeline, oldest first.
    pub async fn minutes(&self, pipeline_id: &str) -> Vec<MinuteRow> {
        heartbeat::pipeline_minutes(&self.control.db, pipeline_id, 0)
            .await
            .unwrap()
    }

    // --- real agents ------------------------------------------------------------------

    /// Options for an agent of this server with its own data directory.
    pub fn agent_options(&self, hostname: &str, pairs: &[(&str, &str)]) -> AgentOptions {
        AgentOptions {
            server_url: self.url.clone(),
            enrollment_token: ENROLLMENT_TOKEN.to_string(),
            data_dir: self.agent_dir(hostname),
            hostname: hostname.to_string(),
            labels: labels(pairs),
            agent_version: "1.2.3".to_string(),
            ..AgentOptions::default()
        }
    }

    pub fn agent_dir(&self, hostname: &str) -> PathBuf {
        self.agents_dir.path().join(hostname)
    }

    /// Where the agent `hostname` writes the config it runs for `pipeline_id`.
    pub fn pipeline_file(&self, hostname: &str, pipeline_id: &str) -> PathBuf {
        self.agent_dir(hostname)
            .join("pipelines")
            .join(format!("{pipeline_id}.yaml"))
    }

    /// A real agent that records configs and reports them RUNNING (no counters).
    pub async fn start_agent(&self, hostname: &str, pairs: &[(&str, &str)]) -> Agent {
        Agent::start(self.agent_options(hostname, pairs))
            .await
            .expect("agent enrolls")
    }

    /// A real agent whose pipelines report 100 more events per poll.
    pub async fn start_simulated_agent(&self, hostname: &str, pairs: &[(&str, &str)]) -> Agent {
        Agent::start_simulated(self.agent_options(hostname, pairs), SimSettings::default())
            .await
            .expect("agent enrolls")
    }

    // --- raw agent protocol -----------------------------------------------------------

    pub async fn post_enroll(&self, body: impl Into<reqwest::Body>) -> Response {
        self.client
            .post(format!("{}/api/agent/enroll", self.url))
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// Enrolls through HTTP with the bootstrap token.
    pub async fn enroll(&self, hostname: &str, pairs: &[(&str, &str)]) -> EnrollResponse {
        let request = EnrollRequest {
            token: ENROLLMENT_TOKEN.to_string(),
            hostname: hostname.to_string(),
            os: Some("linux".to_string()),
            agent_version: Some("1.2.3".to_string()),
            vector_version: None,
            labels: Some(labels(pairs)),
        };
        let resp = self
            .post_enroll(serde_json::to_string(&request).unwrap())
            .await;
        assert_eq!(resp.status(), StatusCode::OK);
        resp.json().await.unwrap()
    }

    pub async fn get_config(&self, node_token: &str, etag: Option<&str>) -> Response {
        let mut req = self
            .client
            .get(format!("{}/api/agent/config", self.url))
            .bearer_auth(node_token);
        if let Some(etag) = etag {
            req = req.header(IF_NONE_MATCH, etag);
        }
        req.send().await.unwrap()
    }

    pub async fn post_config(&self, node_token: &str, body: impl Into<reqwest::Body>) -> Response {
        self.client
            .post(format!("{}/api/agent/config", self.url))
            .bearer_auth(node_token)
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn post_heartbeat(
        &self,
        node_token: &str,
        body: impl Into<reqwest::Body>,
    ) -> Response {
        self.client
            .post(format!("{}/api/agent/heartbeat", self.url))
            .bearer_auth(node_token)
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// An agent route called with a raw `Authorization` header (or none).
    pub async fn call_with_auth(
        &self,
        method: reqwest::Method,
        path: &str,
        authorization: Option<&str>,
        body: &str,
    ) -> Response {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.url))
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(value) = authorization {
            req = req.header(AUTHORIZATION, value);
        }
        req.send().await.unwrap()
    }

    pub async fn get(&self, path: &str) -> Response {
        self.client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap()
    }
}

/// The response's ETag header.
pub fn etag(resp: &Response) -> String {
    resp.headers()
        .get(reqwest::header::ETAG)
        .expect("an ETag header")
        .to_str()
        .unwrap()
        .to_string()
}

/// Asserts a 400 with a JSON `{"error": ...}` body and returns the message.
pub async fn bad_request_message(resp: Response) -> String {
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let content_type = resp.headers()[CONTENT_TYPE].to_str().unwrap().to_string();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    let body: serde_json::Value = resp.json().await.unwrap();
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message in {body}"))
        .to_string()
}
