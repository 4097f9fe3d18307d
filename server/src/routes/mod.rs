//! HTTP routes other than the web app's pages and server functions.

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use vf_control::metrics::RouteLabels;

use crate::config::Config;
use crate::state::AppState;

mod admission;
pub mod agent;
pub mod edge;
pub mod health;
pub mod opamp;
pub mod openapi;

/// What every agent-facing route gets: a body limit (413 above it), fair overload shedding
/// (503 with `Retry-After`, which agents honour; see [`admission`]) and request counts and
/// latency on `/metrics`.
pub(crate) fn agent_route_layers(
    routes: Router<AppState>,
    state: &AppState,
    config: &Config,
    retry_after: &'static str,
) -> Router<AppState> {
    let admission = admission::Admission::new(config.agent_max_concurrency, retry_after);
    let routes = routes
        .layer(DefaultBodyLimit::max(config.agent_max_body_bytes))
        .layer(middleware::from_fn_with_state(admission, admission::admit));
    counted(routes, state)
}

/// Request counts and latency by route and status on `/metrics` (for a stream, the time to
/// its first byte).
pub(crate) fn counted(routes: Router<AppState>, state: &AppState) -> Router<AppState> {
    routes.layer(middleware::from_fn_with_state(
        state.clone(),
        record_metrics,
    ))
}

async fn record_metrics(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let started = Instant::now();
    let resp = next.run(req).await;
    let labels = RouteLabels {
        route,
        status: resp.status().as_u16(),
    };
    state.metrics.agent_requests.get_or_create(&labels).inc();
    state
        .metrics
        .agent_latency
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    resp
}
