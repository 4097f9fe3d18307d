//! [`TestApp`]: the server on port 0 with its own database, a manual clock and a bootstrap
//! environment "test" with a known enrollment token. Operator actions go through
//! `vf-control`, agent traffic through raw HTTP or a real `vf_agent::Agent`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Once};

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, IF_NONE_MATCH, SET_COOKIE};
use reqwest::redirect::Policy;
use reqwest::{Response, StatusCode};
use serde_json::Value;
use tracing_subscriber::filter::DynFilterFn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;
use vf_agent::{Agent, AgentOptions, SimSettings};
use vf_control::access::{Grant, Role};
use vf_control::accounts::{self, User};
use vf_control::fleet::{self, NodeView};
use vf_control::heartbeat::MinuteRow;
use vf_control::pipelines::{self, PipelineRow, VersionRow};
use vf_control::testing::TestDb;
use vf_control::{Actor, Clock, Control, ManualClock};
use vf_protocol::{EnrollRequest, EnrollResponse};
use vf_server::Config;

/// The bootstrap environment every test app starts with.
pub const ENVIRONMENT: &str = "test";
/// Its enrollment token (`VF_BOOTSTRAP_ENROLLMENT_TOKEN`).
pub const ENROLLMENT_TOKEN: &str = "vfe_test-enrollment-token-0123456789";
/// An admin API token of every environment (`VF_BOOTSTRAP_API_TOKEN`); [`TestApp::api`]
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
    /// Plain HTTP, as an agent speaks it: no credentials but those a call adds itself.
    pub client: reqwest::Client,
    /// Operator calls (server functions, admin routes, pages, /metrics) with [`API_TOKEN`].
    pub api: reqwest::Client,
    pub env_id: String,
    /// Keeps the database alive (a SQLite file is deleted on drop).
    pub db: TestDb,
    pub agents_dir: tempfile::TempDir,
    /// Stops the server ([`TestApp::stop`]); `None` once stopped.
    server: Option<RunningServer>,
}

/// A serving [`vf_server::Application`] and the means to shut it down gracefully.
struct RunningServer {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl RunningServer {
    fn start(app: vf_server::Application) -> (String, RunningServer) {
        let url = format!("http://{}", app.addr);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until(async {
            let _ = stopped.await;
        }));
        (url, RunningServer { stop, task })
    }
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
        let (url, server) = RunningServer::start(app);
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
            client: reqwest::Client::new(),
            api: client_with_token(API_TOKEN),
            env_id,
            db,
            agents_dir: tempfile::tempdir().expect("temp dir for agents"),
            server: Some(server),
        }
    }

    /// Shuts the server down as SIGTERM does, releasing its hold on the database file.
    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = server.stop.send(());
            server
                .task
                .await
                .expect("the server task")
                .expect("a clean shutdown");
        }
    }

    /// Stops this server and starts another on the same database, its clock at `now_ms`
    /// and [`test_config`] changed by `configure`: a restart.
    pub async fn restart_with(
        mut self,
        now_ms: i64,
        configure: impl FnOnce(&mut Config),
    ) -> TestApp {
        self.stop().await;
        let clock = ManualClock::new(now_ms);
        let mut config = test_config(&self.db.url);
        configure(&mut config);
        let app = vf_server::build_with_clock(config, Arc::new(clock.clone()))
            .await
            .expect("the server starts again on the same database");
        let control = app.control.clone();
        let (url, server) = RunningServer::start(app);
        TestApp {
            url,
            control,
            clock,
            server: Some(server),
            ..self
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
        vf_control::testing::pipeline_minutes(&self.control.db, pipeline_id, 0)
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

    /// `GET path` as the operator ([`API_TOKEN`]).
    pub async fn get(&self, path: &str) -> Response {
        self.api
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

// --- operators: users, sessions, browsers ---------------------------------------------

/// The password of every user tests create (long enough for the rules).
pub const PASSWORD: &str = "correct horse battery staple";

/// A browser's first visit: no credentials, and redirects are answers to look at, not follow.
pub fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("http client")
}

/// A browser that sends the session cookie `value` with every request.
pub fn browser_with_session(value: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let cookie = reqwest::header::HeaderValue::from_str(&format!("vf_session={value}"))
        .expect("cookie is a header value");
    headers.insert(COOKIE, cookie);
    reqwest::Client::builder()
        .default_headers(headers)
        .redirect(Policy::none())
        .build()
        .expect("http client")
}

/// The whole `Set-Cookie` header that sets the session cookie, if the response has one.
pub fn session_set_cookie(resp: &Response) -> Option<String> {
    resp.headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("vf_session="))
        .map(str::to_string)
}

/// The session cookie's value a response sets (empty when it clears it).
pub fn session_cookie(resp: &Response) -> Option<String> {
    session_set_cookie(resp).map(|c| {
        c.trim_start_matches("vf_session=")
            .split(';')
            .next()
            .unwrap_or_default()
            .to_string()
    })
}

/// The `Location` a redirect points to.
pub fn location(resp: &Response) -> String {
    resp.headers()
        .get(reqwest::header::LOCATION)
        .unwrap_or_else(|| panic!("no Location on a {} answer", resp.status()))
        .to_str()
        .unwrap()
        .to_string()
}

/// A grant of `role` in `environment_id` (`*`: every environment).
pub fn grant(environment_id: &str, role: Role) -> Grant {
    Grant {
        environment_id: environment_id.to_string(),
        role,
    }
}

impl TestApp {
    /// A user with [`PASSWORD`] and `grants`, created by the operator.
    pub async fn create_user(&self, email: &str, grants: &[Grant]) -> User {
        accounts::create_user(
            &self.control.db,
            &operator(),
            email,
            PASSWORD,
            grants,
            self.now(),
        )
        .await
        .unwrap()
    }

    /// A form post as the browser sends it (`client` decides the cookies and the address).
    pub async fn post_form(
        &self,
        client: &reqwest::Client,
        path: &str,
        form: &[(&str, &str)],
    ) -> Response {
        client
            .post(format!("{}{path}", self.url))
            .form(form)
            .send()
            .await
            .unwrap()
    }

    /// `POST /signin` from a fresh browser; the answer, redirects not followed.
    pub async fn sign_in(&self, email: &str, password: &str) -> Response {
        self.post_form(
            &browser(),
            "/signin",
            &[("email", email), ("password", password), ("next", "/")],
        )
        .await
    }

    /// Signs `email` in with [`PASSWORD`]; the session cookie's value.
    pub async fn session_of(&self, email: &str) -> String {
        let resp = self.sign_in(email, PASSWORD).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "sign-in of {email}");
        session_cookie(&resp)
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| panic!("no session cookie for {email}"))
    }

    /// A new user with `grants`, signed in: the session cookie's value.
    pub async fn signed_in_user(&self, email: &str, grants: &[Grant]) -> String {
        self.create_user(email, grants).await;
        self.session_of(email).await
    }

    /// A server function called by `client` with a JSON body; the status and body text.
    pub async fn call_as(
        &self,
        client: &reqwest::Client,
        endpoint: &str,
        body: Value,
    ) -> (u16, String) {
        let resp = client
            .post(format!("{}/api/{endpoint}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }
}

// --- logs -------------------------------------------------------------------------------

thread_local! {
    /// The buffer of the log capture running on this thread, if one is.
    static CAPTURE: RefCell<Option<Arc<Mutex<Vec<u8>>>>> = const { RefCell::new(None) };
}

/// Everything logged through `tracing` (and the `log` crate) on this thread while it lives,
/// every level of every crate, formatted as the server's text logs are. The test must run on
/// a current-thread runtime, so the server's tasks log on this thread too.
///
/// The subscriber is the binary's global default, installed once, because a scoped default
/// misses events whose callsites other test threads register first; it formats nothing on a
/// thread that is not capturing.
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

/// Writes to the current thread's capture.
struct ThreadCapture;

impl io::Write for ThreadCapture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        CAPTURE.with(|c| {
            if let Some(capture) = &*c.borrow() {
                capture.lock().unwrap().extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    pub fn start() -> LogCapture {
        static GLOBAL_SUBSCRIBER: Once = Once::new();
        GLOBAL_SUBSCRIBER.call_once(|| {
            let capturing = DynFilterFn::new(|_, _| CAPTURE.with(|c| c.borrow().is_some()));
            let layer = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(|| ThreadCapture)
                .with_filter(capturing);
            // Also routes `log` records (reqwest's, sqlx's) into tracing.
            tracing_subscriber::registry()
                .with(layer)
                .try_init()
                .expect("no other global tracing subscriber in this test binary");
        });
        let buffer = Arc::new(Mutex::new(Vec::new()));
        CAPTURE.with(|c| *c.borrow_mut() = Some(buffer.clone()));
        LogCapture(buffer)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Drop for LogCapture {
    fn drop(&mut self) {
        CAPTURE.with(|c| c.borrow_mut().take());
    }
}
