//! Rolling rollouts over HTTP: the published edge config document (read by services through
//! the `edge-client` crate) and the admin routes that change it.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Extension, Json, Router};
use serde_json::{json, Value};
use vf_control::access::{self, Role, Target};
use vf_control::accounts::Authenticated;
use vf_control::rolling::{self, Change, StoredRollout};
use vf_control::{Actor, ControlError};

use crate::error::ApiError;
use crate::startup::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/edge-config", get(edge_config))
        .route("/api/admin/rollouts", get(list))
        .route(
            "/api/admin/rollouts/{id}",
            put(set_global).delete(delete_rollout),
        )
        .route(
            "/api/admin/rollouts/{id}/orgs/{org}",
            put(set_org).delete(delete_org),
        )
}

/// `GET /api/edge-config`: the whole document, strong ETag, 304 when unchanged. Needs the
/// read-only edge-config token (or a session or API token with a role in every environment)
/// as a Bearer token.
async fn edge_config(
    State(state): State<AppState>,
    auth: Option<Extension<Authenticated>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let auth = auth.map(|Extension(a)| a).unwrap_or_default();
    match (auth.edge_reader, &auth.principal) {
        (true, _) => {}
        // Signed in with a role in some environments only: 403 naming the role needed, as
        // every other route answers (`access::authorize`).
        (false, Some(p)) => access::check(p.global_role(), Role::Viewer, "every environment")?,
        (false, None) => {
            let mut resp = ApiError(ControlError::Unauthorized).into_response();
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Ok(resp);
        }
    }
    let doc = rolling::edge_config(&state.control.db).await?;
    let etag = format!("\"{}\"", doc.version);
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| none_match(v, &etag));
    let cache = [
        (header::ETAG, etag),
        (header::CACHE_CONTROL, "no-cache".to_string()),
    ];
    if unchanged {
        return Ok((StatusCode::NOT_MODIFIED, cache).into_response());
    }
    Ok((cache, Json(doc)).into_response())
}

/// `If-None-Match` compares weakly (RFC 9110 13.1.2): `W/"7"` matches `"7"` (proxies that
/// compress responses weaken ETags), and `*` matches any current document.
fn none_match(header: &str, etag: &str) -> bool {
    header
        .split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/") == etag)
}

/// The admin routes' door: the same check as every server function.
async fn authorize(
    state: &AppState,
    auth: &Option<Extension<Authenticated>>,
    need: Role,
) -> Result<Actor, ApiError> {
    let principal = auth.as_ref().and_then(|Extension(a)| a.principal.as_ref());
    Ok(
        access::authorize(&state.control.db, principal, need, Target::Global)
            .await?
            .actor,
    )
}

fn rollout_json(s: &StoredRollout) -> Value {
    json!({
        "name": s.rollout.name,
        "global": s.rollout.global,
        "orgs": s.rollout.orgs,
        "retiredAt": s.rollout.retired_at,
        "rowVersion": s.row_version,
        "updatedAt": s.updated_at,
    })
}

fn with_etag(s: &StoredRollout) -> Response {
    let etag = HeaderValue::from_str(&format!("\"{}\"", s.row_version))
        .unwrap_or(HeaderValue::from_static("\"0\""));
    ([(header::ETAG, etag)], Json(rollout_json(s))).into_response()
}

async fn list(
    State(state): State<AppState>,
    auth: Option<Extension<Authenticated>>,
) -> Result<Response, ApiError> {
    authorize(&state, &auth, Role::Viewer).await?;
    let all = rolling::list(&state.control.db).await?;
    Ok(Json(all.iter().map(rollout_json).collect::<Vec<_>>()).into_response())
}

/// `If-Match: "3"` (or `3`): the row version the admin saw.
fn if_match(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(raw) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    raw.to_str()
        .ok()
        .map(|v| v.trim().trim_start_matches("W/").trim_matches('"'))
        .and_then(|v| v.parse().ok())
        .map(Some)
        .ok_or_else(|| ApiError::bad_request("If-Match", "must be the rollout's ETag, e.g. \"3\""))
}

fn percent_of(body: &[u8]) -> Result<vf_rolling::Percent, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("body", format!("not JSON: {e}")))?;
    Ok(rolling::parse_percent(&v["percent"])?)
}

/// Applies a change as `actor` (authorized by the caller first, before reading the body).
async fn change(
    state: &AppState,
    actor: &Actor,
    headers: &HeaderMap,
    id: &str,
    change: Change,
) -> Result<Response, ApiError> {
    let ctl = &state.control;
    let stored = rolling::apply(&ctl.db, actor, id, change, if_match(headers)?, ctl.now()).await?;
    Ok(with_etag(&stored))
}

async fn set_global(
    State(state): State<AppState>,
    auth: Option<Extension<Authenticated>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let actor = authorize(&state, &auth, Role::Admin).await?;
    let p = percent_of(&body)?;
    change(&state, &actor, &headers, &id, Change::SetGlobal(p)).await
}

async fn set_org(
    State(state): State<AppState>,
    auth: Option<Extension<Authenticated>>,
    Path((id, org)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let actor = authorize(&state, &auth, Role::Admin).await?;
    let p = percent_of(&body)?;
    change(&state, &actor, &headers, &id, Change::SetOrg(org, p)).await
}

async fn delete_rollout(
    State(state): State<AppState>,
    auth: Option<Extension<Authenticated>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = authorize(&state, &auth, Role::Admin).await?;
    change(&state, &actor, &headers, &id, Change::Delete).await
}

async fn delete_org(
    State(state): State<AppState>,
    auth: Option<Extension<Authenticated>>,
    Path((id, org)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = authorize(&state, &auth, Role::Admin).await?;
    change(&state, &actor, &headers, &id, Change::RemoveOrg(org)).await
}
