//! Liveness, readiness and metrics.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use vf_control::access::{self, Role};
use vf_control::accounts::Authenticated;
use vf_control::ControlError;

use crate::error::ApiError;
use crate::startup::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
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
    auth: Option<Extension<Authenticated>>,
) -> Result<impl IntoResponse, Response> {
    match auth.and_then(|Extension(a)| a.principal) {
        None => {
            let mut resp = ApiError(ControlError::SignInRequired).into_response();
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Err(resp);
        }
        Some(p) => access::check(p.global_role(), Role::Viewer, "every environment")
            .map_err(|e| ApiError(e).into_response())?,
    }
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
