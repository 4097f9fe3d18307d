//! The vf-agent protocol (SPEC section 4): enroll, config (GET, or POST carrying a
//! heartbeat), heartbeat. Thin: authenticate (the [`AgentNode`] extractor), parse, call
//! `vf-control`, answer.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use vf_control::delivery::KnownNode;
use vf_control::fleet;
use vf_control::{agent, heartbeat};
use vf_protocol::{
    EnrollRequest, Heartbeat, HeartbeatAck, CONFIG_PATH, ENROLL_PATH, HEARTBEAT_PATH,
};

use crate::error::ApiError;
use crate::extract::AgentNode;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(ENROLL_PATH, post(enroll))
        .route(CONFIG_PATH, post(config_post).get(config_get))
        .route(HEARTBEAT_PATH, post(heartbeat_post))
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
    Ok(([(header::ETAG, etag)], Json(config.document())).into_response())
}

async fn heartbeat_post(
    State(state): State<AppState>,
    AgentNode(node): AgentNode,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hb: Heartbeat = parse_json(&body)?;
    let ctl = &state.control;
    heartbeat::record_heartbeat(&ctl.db, &node.node, hb, ctl.now()).await?;
    Ok(Json(HeartbeatAck { ok: true }).into_response())
}
