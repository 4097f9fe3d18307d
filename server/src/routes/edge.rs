//! Rolling rollouts over HTTP: the published edge config document (read by services through
//! the `edge-client` crate) and the admin routes that change it.

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde_json::{json, Value};
use vf_control::access::{self, Role, Target};
use vf_control::rolling::{self, Change, Comment, StoredRollout};
use vf_control::{Actor, ControlError};

use crate::auth::bearer_challenge;
use crate::error::ApiError;
use crate::extract::{Caller, Operator};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/edge-config",
            get(edge_config).layer(map_response(bearer_challenge)),
        )
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

/// Who may read the edge config: the read-only edge-config token, or a session or API token
/// with a role in every environment. Nobody: 401 `Unauthorized`; a role in some
/// environments only: 403 naming the role needed, as every other route answers
/// (`access::authorize`).
#[derive(Debug, Clone, Copy)]
pub struct EdgeConfigReader;

impl FromRequestParts<AppState> for EdgeConfigReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Caller(auth) = Caller::from_request_parts(parts, state).await?;
        match (auth.edge_reader, &auth.principal) {
            (true, _) => {}
            (false, Some(p)) => access::check(p.global_role(), Role::Viewer, "every environment")?,
            (false, None) => return Err(ApiError(ControlError::Unauthorized)),
        }
        Ok(EdgeConfigReader)
    }
}

/// `GET /api/edge-config`: the whole document, strong ETag, 304 when unchanged. Needs an
/// [`EdgeConfigReader`]'s Bearer token (or session).
async fn edge_config(
    State(state): State<AppState>,
    _: EdgeConfigReader,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
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

/// The admin routes' door, past the [`Operator`] extractor: the same check as every server
/// function.
async fn authorize(
    state: &AppState,
    Operator(principal): &Operator,
    need: Role,
) -> Result<Actor, ApiError> {
    Ok(
        access::authorize(&state.control.db, Some(principal), need, Target::Global)
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

async fn list(State(state): State<AppState>, operator: Operator) -> Result<Response, ApiError> {
    authorize(&state, &operator, Role::Viewer).await?;
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

/// A PUT body: `{"percent": 50, "comment": "why"}` (`comment` optional).
fn percent_of(body: &[u8]) -> Result<(vf_rolling::Percent, Option<Comment>), ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("body", format!("not JSON: {e}")))?;
    let percent = rolling::parse_percent(&v["percent"])?;
    let comment = match &v["comment"] {
        Value::Null => None,
        Value::String(c) => Comment::parse(Some(c.clone()))?,
        _ => return Err(ApiError::bad_request("comment", "must be text")),
    };
    Ok((percent, comment))
}

/// Applies a change as `actor` (authorized by the caller first, before reading the body).
async fn change(
    state: &AppState,
    actor: &Actor,
    headers: &HeaderMap,
    id: &str,
    change: Change,
    comment: Option<Comment>,
) -> Result<Response, ApiError> {
    let ctl = &state.control;
    let if_match = if_match(headers)?;
    let stored = rolling::apply_noted(
        &ctl.db,
        actor,
        id,
        change,
        if_match,
        comment.as_ref(),
        ctl.now(),
    )
    .await?;
    Ok(with_etag(&stored))
}

async fn set_global(
    State(state): State<AppState>,
    operator: Operator,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let actor = authorize(&state, &operator, Role::Admin).await?;
    let (p, comment) = percent_of(&body)?;
    change(&state, &actor, &headers, &id, Change::SetGlobal(p), comment).await
}

async fn set_org(
    State(state): State<AppState>,
    operator: Operator,
    Path((id, org)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let actor = authorize(&state, &operator, Role::Admin).await?;
    let (p, comment) = percent_of(&body)?;
    change(
        &state,
        &actor,
        &headers,
        &id,
        Change::SetOrg(org, p),
        comment,
    )
    .await
}

async fn delete_rollout(
    State(state): State<AppState>,
    operator: Operator,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = authorize(&state, &operator, Role::Admin).await?;
    change(&state, &actor, &headers, &id, Change::Delete, None).await
}

async fn delete_org(
    State(state): State<AppState>,
    operator: Operator,
    Path((id, org)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = authorize(&state, &operator, Role::Admin).await?;
    change(&state, &actor, &headers, &id, Change::RemoveOrg(org), None).await
}

#[cfg(test)]
mod tests {
    use axum::body::to_bytes;
    use axum::http::Request;
    use vf_control::access::ALL_ENVIRONMENTS;
    use vf_control::accounts::{self, TokenRole};

    use super::*;
    use crate::state::testing;

    async fn read(
        state: &AppState,
        authorization: Option<&str>,
    ) -> Result<(), (StatusCode, Value)> {
        let mut req = Request::builder().uri("/api/edge-config");
        if let Some(value) = authorization {
            req = req.header(header::AUTHORIZATION, value);
        }
        let mut parts = req.body(()).unwrap().into_parts().0;
        match EdgeConfigReader::from_request_parts(&mut parts, state).await {
            Ok(EdgeConfigReader) => Ok(()),
            Err(rejection) => {
                let resp = rejection.into_response();
                let status = resp.status();
                let body = to_bytes(resp.into_body(), 64 * 1024).await.unwrap();
                Err((status, serde_json::from_slice(&body).unwrap()))
            }
        }
    }

    #[tokio::test]
    async fn the_edge_config_is_read_with_the_edge_token_or_a_role_everywhere_only() {
        let (state, _db) = testing::state().await;
        let ctl = &state.control;
        let system = Actor::system("test");
        let tokens = [
            (
                "edge",
                ALL_ENVIRONMENTS,
                TokenRole::EdgeConfig,
                "vfc_unit-edge-token-0123",
            ),
            (
                "viewer",
                ALL_ENVIRONMENTS,
                TokenRole::Role(Role::Viewer),
                "vfa_unit-viewer-0123",
            ),
        ];
        for (name, env, role, value) in tokens {
            accounts::create_api_token(&ctl.db, &system, name, env, role, Some(value), ctl.now())
                .await
                .unwrap();
        }
        let unauthorized = (
            StatusCode::UNAUTHORIZED,
            json!({ "error": ControlError::Unauthorized.to_string() }),
        );
        assert_eq!(read(&state, None).await, Err(unauthorized.clone()));
        assert_eq!(
            read(&state, Some("Bearer vfc_not-a-token-anyone-has")).await,
            Err(unauthorized.clone())
        );
        assert_eq!(
            read(&state, Some("Basic vfc_unit-edge-token-0123")).await,
            Err(unauthorized)
        );
        assert_eq!(
            read(&state, Some("Bearer vfc_unit-edge-token-0123")).await,
            Ok(())
        );
        assert_eq!(
            read(&state, Some("Bearer vfa_unit-viewer-0123")).await,
            Ok(())
        );
    }
}
