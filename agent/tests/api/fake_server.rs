//! A tiny in-test control plane implementing the three agent routes to the wire contract.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Json, Router,
};
use tokio::sync::watch;
use vf_agent::{sha256_hex, AgentOptions};
use vf_protocol::{
    ConfigResponse, EnrollRequest, EnrollResponse, Heartbeat, PendingAction, PipelineConfig,
    PipelineReport,
};

pub const ENROLLMENT_TOKEN: &str = "enroll-secret";

#[derive(Default)]
struct Fleet {
    nodes_by_token: HashMap<String, String>,
    revoked: HashSet<String>,
    enrollments: Vec<EnrollRequest>,
    served: Vec<PipelineConfig>,
    served_to: HashMap<String, Vec<PipelineConfig>>,
    heartbeats: HashMap<String, Vec<Heartbeat>>,
    config_statuses: Vec<u16>,
    overloaded_retry_after: Option<u64>,
    poll_interval_ms: i64,
    pending_action: Option<PendingAction>,
}

type Shared = Arc<Mutex<Fleet>>;

#[derive(Clone)]
struct AppState {
    fleet: Shared,
    polls: Arc<watch::Sender<usize>>,
}

pub struct FakeServer {
    pub url: String,
    fleet: Shared,
    polls: watch::Receiver<usize>,
}

impl FakeServer {
    pub async fn start() -> FakeServer {
        let fleet: Shared = Arc::new(Mutex::new(Fleet {
            poll_interval_ms: 5_000,
            ..Fleet::default()
        }));
        let (polls_tx, polls) = watch::channel(0);
        let state = AppState {
            fleet: fleet.clone(),
            polls: Arc::new(polls_tx),
        };
        let app = Router::new()
            .route("/api/agent/enroll", post(enroll))
            .route("/api/agent/config", post(config))
            .route("/api/agent/heartbeat", post(heartbeat))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeServer { url, fleet, polls }
    }

    fn fleet(&self) -> std::sync::MutexGuard<'_, Fleet> {
        self.fleet.lock().unwrap()
    }

    /// Agent options pointing at this server, storing state in `data_dir`.
    pub fn options(&self, data_dir: &Path) -> AgentOptions {
        AgentOptions {
            server_url: self.url.clone(),
            enrollment_token: ENROLLMENT_TOKEN.to_string(),
            data_dir: data_dir.to_path_buf(),
            hostname: "node-a".to_string(),
            labels: BTreeMap::from([("region".to_string(), "eu".to_string())]),
            ..AgentOptions::default()
        }
    }

    /// The pipelines every node is served (unless `serve_to` overrides it for one node).
    pub fn serve(&self, pipelines: Vec<PipelineConfig>) {
        self.fleet().served = pipelines;
    }

    pub fn serve_to(&self, node_id: &str, pipelines: Vec<PipelineConfig>) {
        self.fleet()
            .served_to
            .insert(node_id.to_string(), pipelines);
    }

    /// Every config answer carries `action` from now on.
    pub fn ask(&self, action: PendingAction) {
        self.fleet().pending_action = Some(action);
    }

    pub fn set_poll_interval_ms(&self, ms: i64) {
        self.fleet().poll_interval_ms = ms;
    }

    pub fn revoke(&self, node_id: &str) {
        self.fleet().revoked.insert(node_id.to_string());
    }

    pub fn overload(&self, retry_after_seconds: Option<u64>) {
        self.fleet().overloaded_retry_after = retry_after_seconds;
    }

    pub fn enrollments(&self) -> Vec<EnrollRequest> {
        self.fleet().enrollments.clone()
    }

    /// Status codes of every `/api/agent/config` answer, in order.
    pub fn config_statuses(&self) -> Vec<u16> {
        self.fleet().config_statuses.clone()
    }

    pub fn heartbeats(&self, node_id: &str) -> Vec<Heartbeat> {
        self.fleet()
            .heartbeats
            .get(node_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The latest report the node sent for the pipeline.
    pub fn last_report(&self, node_id: &str, pipeline_id: &str) -> PipelineReport {
        self.heartbeats(node_id)
            .iter()
            .rev()
            .flat_map(|h| h.pipelines.iter().rev())
            .find(|p| p.pipeline_id == pipeline_id)
            .cloned()
            .unwrap_or_else(|| panic!("{node_id} never reported {pipeline_id}"))
    }

    /// Resolves once `/api/agent/config` has been called `count` times in total.
    pub async fn wait_for_polls(&self, count: usize) {
        let mut polls = self.polls.clone();
        tokio::time::timeout(Duration::from_secs(10), polls.wait_for(|n| *n >= count))
            .await
            .expect("agent did not poll in time")
            .unwrap();
    }
}

/// A pipeline config with a correct checksum.
pub fn pipeline(id: &str, version: i64, yaml: &str) -> PipelineConfig {
    PipelineConfig {
        pipeline_id: id.to_string(),
        pipeline_name: format!("{id} pipeline"),
        version,
        config_yaml: yaml.to_string(),
        checksum: sha256_hex(yaml),
        log_level: None,
    }
}

async fn enroll(State(state): State<AppState>, Json(request): Json<EnrollRequest>) -> Response {
    let mut fleet = state.fleet.lock().unwrap();
    if request.token != ENROLLMENT_TOKEN {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    fleet.enrollments.push(request);
    let n = fleet.enrollments.len();
    let (node_id, node_token) = (format!("node-{n}"), format!("node-token-{n}"));
    fleet
        .nodes_by_token
        .insert(node_token.clone(), node_id.clone());
    Json(EnrollResponse {
        node_id,
        node_token,
        environment_id: "env-1".to_string(),
        environment_name: "staging".to_string(),
    })
    .into_response()
}

fn authenticate(fleet: &Fleet, headers: &HeaderMap) -> Option<String> {
    let token = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?;
    let node_id = fleet.nodes_by_token.get(token)?;
    (!fleet.revoked.contains(node_id)).then(|| node_id.clone())
}

async fn config(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(report): Json<Heartbeat>,
) -> Response {
    let response = {
        let mut fleet = state.fleet.lock().unwrap();
        let response = answer_config(&mut fleet, &headers, report);
        fleet.config_statuses.push(response.status().as_u16());
        response
    };
    state.polls.send_modify(|n| *n += 1);
    response
}

fn answer_config(fleet: &mut Fleet, headers: &HeaderMap, report: Heartbeat) -> Response {
    if let Some(seconds) = fleet.overloaded_retry_after {
        let retry_after = [(header::RETRY_AFTER, seconds.to_string())];
        return (StatusCode::SERVICE_UNAVAILABLE, retry_after).into_response();
    }
    let Some(node_id) = authenticate(fleet, headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    fleet
        .heartbeats
        .entry(node_id.clone())
        .or_default()
        .push(report);
    let pipelines = fleet
        .served_to
        .get(&node_id)
        .unwrap_or(&fleet.served)
        .clone();
    let body = ConfigResponse {
        pipelines,
        poll_interval_ms: fleet.poll_interval_ms,
        secret_backend: "BUILTIN".to_string(),
        push_url: None,
        sample_requests: Vec::new(),
        pending_action: fleet.pending_action.clone(),
    };
    let etag = format!("\"{}\"", sha256_hex(&serde_json::to_string(&body).unwrap()));
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|sent| sent.as_bytes() == etag.as_bytes());
    if unchanged {
        return StatusCode::NOT_MODIFIED.into_response();
    }
    ([(header::ETAG, etag)], Json(body)).into_response()
}

async fn heartbeat(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(report): Json<Heartbeat>,
) -> Response {
    let mut fleet = state.fleet.lock().unwrap();
    let Some(node_id) = authenticate(&fleet, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    fleet.heartbeats.entry(node_id).or_default().push(report);
    Json(serde_json::json!({ "ok": true })).into_response()
}
