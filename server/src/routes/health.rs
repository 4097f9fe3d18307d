//! Liveness, readiness and metrics.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::middleware::map_response;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use vf_control::access::{self, Role};

use crate::auth::bearer_challenge;
use crate::error::ApiError;
use crate::extract::Operator;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route(
            "/metrics",
            get(metrics).layer(map_response(bearer_challenge)),
        )
}

/// Ready when the database answers.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.control.db.ping().await {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
    }
}

/// `GET /metrics` names pipelines and counts sign-ins: it needs a role in every
/// environment. Prometheus scrapes it with a viewer API token (`authorization` in its
/// scrape config).
async fn metrics(
    State(state): State<AppState>,
    Operator(p): Operator,
) -> Result<impl IntoResponse, ApiError> {
    access::check(p.global_role(), Role::Viewer, "every environment")?;
    // The capped-delta count includes every heartbeat answered before this scrape.
    state.control.db.heartbeats.settled().await;
    let streams = state.control.push.connected();
    state.metrics.push_streams.set(streams as i64);
    match vf_control::releases::latest_statuses(&state.control.db).await {
        Ok(latest) => state.metrics.set_release_statuses(&latest),
        Err(e) => tracing::warn!(
            error = e.chain(),
            "could not read release statuses for /metrics"
        ),
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    ))
}
