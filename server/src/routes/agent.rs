//! The vf-agent protocol (SPEC section 4): enroll, config (GET, or POST carrying a
//! heartbeat), heartbeat, the push stream, and what agents ship besides heartbeats (logs,
//! sample answers, tap events). Thin: authenticate (the [`AgentNode`] extractor), parse,
//! call `vf-control`, answer.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use vf_control::delivery::KnownNode;
use vf_control::fleet;
use vf_control::{agent, channel, heartbeat};
use vf_protocol::{
    EnrollRequest, Heartbeat, HeartbeatAck, PipelineLogs, PushMessage, SampleResult, SampleResults,
    TapEvents, CONFIG_PATH, ENROLL_PATH, HEARTBEAT_PATH, LOGS_PATH, PUSH_PATH, SAMPLES_PATH,
    TAP_EVENTS_PATH,
};

use crate::error::ApiError;
use crate::extract::AgentNode;
use crate::state::AppState;

/// The request-and-answer routes (behind the agent routes' body limit and admission).
pub fn router() -> Router<AppState> {
    Router::new()
        .route(ENROLL_PATH, post(enroll))
        .route(CONFIG_PATH, post(config_post).get(config_get))
        .route(HEARTBEAT_PATH, post(heartbeat_post))
        .route(LOGS_PATH, post(logs_post))
        .route(SAMPLES_PATH, post(samples_post))
        .route(TAP_EVENTS_PATH, post(tap_events_post))
}

/// The push stream: open for as long as the agent stays, so it holds no admission slot.
pub fn push_router() -> Router<AppState> {
    Router::new().route(PUSH_PATH, get(push_stream))
}

/// Under this, an idle stream gets a `: keepalive` comment (the contract says at least
/// every 25 s; proxies commonly drop a connection idle for 30 to 60 s).
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);

fn ok() -> Response {
    Json(HeartbeatAck { ok: true }).into_response()
}

/// Parses a JSON body; errors name the offending field (`pipelines[0].version: ...`).
fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "body".to_string()
        } else {
            path
        };
        ApiError::bad_request(field, e.into_inner().to_string())
    })
}

async fn enroll(State(state): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let req: EnrollRequest = parse_json(&body)?;
    let ctl = &state.control;
    let resp = agent::enroll(&ctl.db, req, ctl.settings.poll_interval_ms, ctl.now()).await?;
    Ok(Json(resp).into_response())
}

async fn config_get(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    serve_config(&state, &node, &headers, None).await
}

async fn config_post(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hb: Option<Heartbeat> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(parse_json(&body)?)
    };
    serve_config(&state, &node, &headers, hb).await
}

async fn serve_config(
    state: &AppState,
    known: &KnownNode,
    headers: &HeaderMap,
    hb: Option<Heartbeat>,
) -> Result<Response, ApiError> {
    let ctl = &state.control;
    let now = ctl.now();
    let interval = ctl.settings.poll_interval_ms;
    let mut hb = hb;
    let extras = hb.as_mut().map(Extras::take).transpose()?;
    let config = match hb {
        Some(hb) if hb.labels.is_some() => {
            heartbeat::record_heartbeat(&ctl.db, &known.node, hb, now).await?;
            // Serve by the labels just reported: a node the selector now excludes must not
            // receive the pipeline, not even for one round trip.
            let reread = fleet::get_node(&ctl.db, &known.node.id).await?;
            agent::config_for_node(ctl, &reread, interval).await?
        }
        Some(hb) => {
            heartbeat::record_heartbeat(&ctl.db, &known.node, hb, now).await?;
            agent::config_for(ctl, known, interval).await?
        }
        None => {
            heartbeat::touch(&ctl.db, &known.node, now);
            agent::config_for(ctl, known, interval).await?
        }
    };
    if let Some(extras) = extras {
        extras.keep(state, &known.node.id, now).await?;
    }
    for kind in config.kinds() {
        state.metrics.served(kind);
    }
    let etag = config.etag.as_str();
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if unchanged {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
    }
    let mut document = config.document();
    document.push_url = Some(push_url(state, headers));
    Ok(([(header::ETAG, etag)], Json(document)).into_response())
}

/// Where agents open the push stream: under `VF_PUBLIC_URL` when set, else the host and
/// scheme this request came to (`X-Forwarded-Proto` when a proxy says so).
fn push_url(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(public) = &state.auth.public_origin {
        return format!("{public}{PUSH_PATH}");
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text("host").unwrap_or("localhost");
    let scheme = match text("x-forwarded-proto") {
        Some("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}{PUSH_PATH}")
}

async fn heartbeat_post(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut hb: Heartbeat = parse_json(&body)?;
    let ctl = &state.control;
    let extras = Extras::take(&mut hb)?;
    heartbeat::record_heartbeat(&ctl.db, &node.node, hb, ctl.now()).await?;
    extras.keep(&state, &node.node.id, ctl.now()).await?;
    Ok(ok())
}

/// What a heartbeat (on either route) carries for the channel's stores rather than for
/// `record_heartbeat`: answers to sample requests, and each report's `recentLogs`.
struct Extras {
    samples: Option<Vec<SampleResult>>,
    logs: Vec<PipelineLogs>,
}

impl Extras {
    /// Takes the sample answers out of `hb` (checked, so a bad one refuses the heartbeat
    /// before anything is written) and copies the reports' log lines.
    fn take(hb: &mut Heartbeat) -> Result<Extras, ApiError> {
        let samples = hb.sample_results.take();
        if let Some(samples) = &samples {
            channel::check_samples("sampleResults", samples)?;
        }
        let logs = hb
            .pipelines
            .iter()
            .filter_map(|r| {
                Some(PipelineLogs {
                    pipeline_id: r.pipeline_id.clone(),
                    lines: r.recent_logs.clone()?,
                })
            })
            .collect();
        Ok(Extras { samples, logs })
    }

    /// Stores them, once the heartbeat itself is recorded.
    async fn keep(self, state: &AppState, node_id: &str, now: i64) -> Result<(), ApiError> {
        let db = &state.control.db;
        channel::append_reported_logs(db, node_id, &self.logs, now).await?;
        if let Some(samples) = self.samples {
            channel::record_samples(db, node_id, "sampleResults", &samples, now).await?;
        }
        Ok(())
    }
}

async fn logs_post(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    body: Bytes,
) -> Result<Response, ApiError> {
    let batches: Vec<PipelineLogs> = parse_json(&body)?;
    let ctl = &state.control;
    channel::append_logs(&ctl.db, &node.node.id, &batches, ctl.now()).await?;
    Ok(ok())
}

async fn samples_post(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    body: Bytes,
) -> Result<Response, ApiError> {
    let samples: SampleResults = parse_json(&body)?;
    let ctl = &state.control;
    channel::record_samples(
        &ctl.db,
        &node.node.id,
        "results",
        &samples.results,
        ctl.now(),
    )
    .await?;
    Ok(ok())
}

async fn tap_events_post(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    body: Bytes,
) -> Result<Response, ApiError> {
    let tap: TapEvents = parse_json(&body)?;
    let ctl = &state.control;
    channel::record_tap(&ctl.db, &node.node.id, &tap, ctl.now()).await?;
    Ok(ok())
}

/// `text/event-stream` of [`PushMessage`]s for this node, until it goes away or the server
/// stops. Registered with what the node is served right now, so the first message is the
/// first change after the stream opened.
async fn push_stream(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let ctl = &state.control;
    let token = crate::auth::bearer(&headers)
        .ok_or(ApiError(vf_control::ControlError::Unauthorized))?
        .to_owned();
    let config = agent::config_for(ctl, &node, ctl.settings.poll_interval_ms).await?;
    let connection = ctl.push.connect(node.node.id.clone(), token, &config);
    let events = futures::stream::unfold(connection, |mut connection| async move {
        let message = connection.messages.recv().await?;
        Some((event(&message), connection))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEPALIVE).text("keepalive"))
        .into_response())
}

/// `event: <type>` and `data: <the message as one JSON object>`.
fn event(message: &PushMessage) -> Result<Event, std::convert::Infallible> {
    let data = serde_json::to_value(message).unwrap_or_default();
    let kind = data["type"].as_str().unwrap_or("message").to_owned();
    Ok(Event::default().event(kind).data(data.to_string()))
}
