//! [`VfServer`]: the real VectorFlow server that tests can stop and start again on the same
//! port and database, and drive through its admin routes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use edge_client::{Customer, EdgeClientOptions, EdgeConfigStore, RolloutSnapshot};
use reqwest::header::IF_MATCH;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use vf_control::testing::TestDb;
use vf_control::ManualClock;
use vf_server::Config;

/// Where the server's manual clock starts.
pub const T0: i64 = 1_700_000_040_000;
/// A read-only token long enough for the server (16+ characters).
pub const TOKEN: &str = "edge-read-token-0123456789";
/// The admin API token the tests change rollouts with (`VF_BOOTSTRAP_API_TOKEN`).
pub const ADMIN_TOKEN: &str = "vfa_edge-tests-admin-token-0123456789";

pub struct VfServer {
    pub url: String,
    pub addr: SocketAddr,
    pub clock: ManualClock,
    pub admin: reqwest::Client,
    db: TestDb,
    token: Option<String>,
    running: Option<Running>,
}

struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl VfServer {
    /// On a fresh temporary SQLite database, with `VF_EDGE_CONFIG_TOKEN` set to [`TOKEN`]
    /// (the document always needs a token).
    pub async fn start() -> VfServer {
        VfServer::start_with(Some(TOKEN.to_owned())).await
    }

    async fn start_with(token: Option<String>) -> VfServer {
        let db = TestDb::sqlite();
        let clock = ManualClock::new(T0);
        let (addr, running) = boot(&db, None, &clock, token.clone()).await;
        VfServer {
            url: format!("http://{addr}"),
            addr,
            clock,
            admin: admin_client(),
            db,
            token,
            running: Some(running),
        }
    }

    /// Stops serving (in-flight requests finish, idle connections close) and frees the port.
    pub async fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.stop.send(());
            running.task.await.unwrap();
        }
    }

    /// Serves again on the same port and database.
    pub async fn restart(&mut self) {
        self.stop().await;
        let (_, running) = boot(&self.db, Some(self.addr), &self.clock, self.token.clone()).await;
        self.running = Some(running);
    }

    /// Serves again on the same port from a new, empty database (a restore gone wrong).
    pub async fn restart_on_a_fresh_database(&mut self) {
        self.stop().await;
        self.db = TestDb::sqlite();
        let (_, running) = boot(&self.db, Some(self.addr), &self.clock, self.token.clone()).await;
        self.running = Some(running);
    }

    /// Options for a store of this server that only polls when told (`refresh_now`), apart
    /// from its first poll in `start`; with the read-only token.
    pub fn options(&self) -> EdgeClientOptions {
        self.options_without_token().with_token(TOKEN)
    }

    /// The same, sending no token.
    pub fn options_without_token(&self) -> EdgeClientOptions {
        EdgeClientOptions {
            poll_interval: Duration::from_secs(3600),
            ..EdgeClientOptions::for_server(&self.url)
        }
    }

    /// A started store of this server (its first poll done).
    pub async fn store(&self) -> EdgeConfigStore {
        EdgeConfigStore::start(self.options()).await.unwrap()
    }

    /// The rollout as the admin API lists it, if it exists.
    pub async fn rollout(&self, name: &str) -> Option<Value> {
        let all: Vec<Value> = self
            .admin
            .get(format!("{}/api/admin/rollouts", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        all.into_iter().find(|r| r["name"] == name)
    }

    /// `PUT /api/admin/rollouts/{name}` with the row version just read as `If-Match`.
    pub async fn set_percent(&self, name: &str, percent: u8) -> Value {
        let url = format!("{}/api/admin/rollouts/{name}", self.url);
        self.admin_put(name, &url, percent).await
    }

    /// `PUT /api/admin/rollouts/{name}/orgs/{org}`.
    pub async fn set_org_percent(&self, name: &str, org: &str, percent: u8) -> Value {
        let url = format!("{}/api/admin/rollouts/{name}/orgs/{org}", self.url);
        self.admin_put(name, &url, percent).await
    }

    /// `DELETE /api/admin/rollouts/{name}/orgs/{org}`.
    pub async fn remove_org(&self, name: &str, org: &str) -> Value {
        let url = format!("{}/api/admin/rollouts/{name}/orgs/{org}", self.url);
        self.clock.advance_ms(1_000);
        let version = self.rollout(name).await.unwrap()["rowVersion"].clone();
        let response = self
            .admin
            .delete(url)
            .header(IF_MATCH, format!("\"{version}\""))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        response.json().await.unwrap()
    }

    async fn admin_put(&self, name: &str, url: &str, percent: u8) -> Value {
        // Each change happens a second after the previous one.
        self.clock.advance_ms(1_000);
        let mut request = self.admin.put(url).json(&json!({ "percent": percent }));
        if let Some(existing) = self.rollout(name).await {
            request = request.header(IF_MATCH, format!("\"{}\"", existing["rowVersion"]));
        }
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        response.json().await.unwrap()
    }

    pub fn now(&self) -> i64 {
        use vf_control::Clock;
        self.clock.now_ms()
    }
}

/// Sends the admin API token with every request.
fn admin_client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_str(&format!("Bearer {ADMIN_TOKEN}"))
            .expect("token is a header value"),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("http client")
}

async fn boot(
    db: &TestDb,
    addr: Option<SocketAddr>,
    clock: &ManualClock,
    token: Option<String>,
) -> (SocketAddr, Running) {
    let mut config = Config::for_tests(&db.url);
    if let Some(addr) = addr {
        config.addr = addr;
    }
    config.edge_config_token = token;
    config.bootstrap_api_token = Some(ADMIN_TOKEN.to_string());
    let app = vf_server::build_with_clock(config, Arc::new(clock.clone()))
        .await
        .expect("build the application");
    let addr = app.addr;
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        app.run_until(async {
            let _ = stopped.await;
        })
        .await
        .expect("the server runs");
    });
    (addr, Running { stop, task })
}

/// A snapshot of the store's current document for `customer`.
pub fn snapshot(store: &EdgeConfigStore, customer: &Customer) -> RolloutSnapshot {
    RolloutSnapshot::new(store.current(), Some(customer.clone()))
}

/// A customer whose bucket is in `min..=max`.
pub fn customer_in(min: u8, max: u8) -> Customer {
    Customer::new(edge_client::find_customer_in_bucket_range(min, max).unwrap())
}
