//! Who sent a request, as axum extractors: a route says what caller it needs by taking one
//! as an argument, and the extractor's rejection is the answer to anyone else.
//!
//! - [`ClientIp`]: the client's address, as the audit log records it. Never rejects.
//! - [`Caller`]: whoever the session cookie or bearer token names, perhaps nobody. Resolved
//!   once per request (the result is kept on the request for later extractors and for the
//!   server functions, which read it from the request's parts).
//! - [`Operator`]: a signed-in user or an API token with roles; nobody else gets 401.
//! - [`AgentNode`]: an enrolled node, by its node token; anyone else gets 401.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use vf_control::access::Principal;
use vf_control::accounts::{self, sessions::COOKIE, Authenticated};
use vf_control::delivery::KnownNode;
use vf_control::{agent, ControlError};

use crate::auth::{bearer, cookie, AuthSettings};
use crate::error::ApiError;
use crate::state::AppState;

/// The client's address: the trusted proxy's header when one is configured and carries an
/// address, else the peer address of the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIp(pub Option<String>);

impl ClientIp {
    fn of(parts: &Parts, settings: &AuthSettings) -> Self {
        if let Some(name) = &settings.client_ip_header {
            let forwarded = parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.rsplit(',').next())
                .and_then(|v| v.trim().parse::<IpAddr>().ok());
            if let Some(ip) = forwarded {
                return ClientIp(Some(ip.to_string()));
            }
        }
        ClientIp(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| addr.ip().to_string()),
        )
    }
}

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        Ok(ClientIp::of(parts, &state.auth))
    }
}

/// Whoever the bearer token (first) or the session cookie names; nobody when neither
/// resolves. Rejects only when the database cannot answer (500).
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Authenticated);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(known) = parts.extensions.get::<Authenticated>() {
            return Ok(Caller(known.clone()));
        }
        let ClientIp(ip) = ClientIp::of(parts, &state.auth);
        let session = cookie(&parts.headers, COOKIE);
        let resolved = accounts::authenticate(
            &state.control.db,
            session.as_deref(),
            bearer(&parts.headers),
            ip.as_deref(),
            state.control.now(),
        )
        .await?;
        // Kept for the server functions (`app::api::server::principal`) and any later
        // extractor of the same request.
        parts.extensions.insert(resolved.clone());
        Ok(Caller(resolved))
    }
}

/// An operator: a live session or an API token with roles (not the read-only edge-config
/// token). Nobody else: 401 `SignInRequired`. What the operator may do is still the route's
/// call (`access::authorize` / `access::check`).
#[derive(Debug, Clone)]
pub struct Operator(pub Principal);

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Caller(auth) = Caller::from_request_parts(parts, state).await?;
        auth.principal
            .map(Operator)
            .ok_or(ApiError(ControlError::SignInRequired))
    }
}

/// An enrolled, unrevoked node, named by its node token (`Authorization: Bearer vfn_...`).
/// No token, another scheme or an unknown or revoked token: 401 `Unauthorized`.
#[derive(Debug, Clone)]
pub struct AgentNode(pub Arc<KnownNode>);

impl FromRequestParts<AppState> for AgentNode {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(&parts.headers).ok_or(ApiError(ControlError::Unauthorized))?;
        Ok(AgentNode(
            agent::node_for_token(&state.control, token).await?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use axum::body::to_bytes;
    use axum::http::{header, Request, StatusCode};
    use axum::response::IntoResponse;
    use vf_control::access::{Role, ALL_ENVIRONMENTS};
    use vf_control::accounts::TokenRole;
    use vf_control::Actor;

    use super::*;
    use crate::state::testing;

    fn parts(authorization: Option<&str>) -> Parts {
        let mut req = Request::builder().uri("/metrics");
        if let Some(value) = authorization {
            req = req.header(header::AUTHORIZATION, value);
        }
        req.body(()).unwrap().into_parts().0
    }

    /// The status and the JSON body of a rejection.
    async fn answer(rejection: ApiError) -> (StatusCode, serde_json::Value) {
        let resp = rejection.into_response();
        let status = resp.status();
        let body = to_bytes(resp.into_body(), 64 * 1024).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    fn message(e: ControlError) -> serde_json::Value {
        serde_json::json!({ "error": e.to_string() })
    }

    #[tokio::test]
    async fn a_node_without_a_node_token_or_with_a_wrong_one_is_refused_with_401() {
        let (state, _db) = testing::state().await;
        for auth in [
            None,
            Some("Bearer vfn_0000000000000000000000000000000000000000"),
            Some("Basic dXNlcjpwYXNz"),
            Some("Bearer "),
        ] {
            let rejection = AgentNode::from_request_parts(&mut parts(auth), &state)
                .await
                .unwrap_err();
            assert_eq!(
                answer(rejection).await,
                (
                    StatusCode::UNAUTHORIZED,
                    message(ControlError::Unauthorized)
                ),
                "{auth:?}"
            );
        }
    }

    #[tokio::test]
    async fn an_operator_needs_a_session_or_an_api_token_with_roles() {
        let (state, _db) = testing::state().await;
        let ctl = &state.control;
        let system = Actor::system("test");
        let admin = "vfa_unit-test-admin-token-0123";
        let edge = "vfc_unit-test-edge-token-0123";
        for (name, role, value) in [
            ("admin", TokenRole::Role(Role::Admin), admin),
            ("edge", TokenRole::EdgeConfig, edge),
        ] {
            accounts::create_api_token(
                &ctl.db,
                &system,
                name,
                ALL_ENVIRONMENTS,
                role,
                Some(value),
                ctl.now(),
            )
            .await
            .unwrap();
        }

        let refused = [
            None,
            Some("Bearer vfa_not-a-token-anyone-was-given".to_string()),
            Some(format!("Basic {admin}")),
            Some(format!("Bearer {edge}")),
        ];
        for auth in refused {
            let rejection = Operator::from_request_parts(&mut parts(auth.as_deref()), &state)
                .await
                .unwrap_err();
            assert_eq!(
                answer(rejection).await,
                (
                    StatusCode::UNAUTHORIZED,
                    message(ControlError::SignInRequired)
                ),
                "{auth:?}"
            );
        }

        let mut admitted = parts(Some(&format!("bearer {admin}")));
        let Operator(p) = Operator::from_request_parts(&mut admitted, &state)
            .await
            .unwrap();
        assert_eq!(p.global_role(), Some(Role::Admin));
        assert!(
            admitted.extensions.get::<Authenticated>().is_some(),
            "the caller is kept on the request for the server functions"
        );
    }

    #[tokio::test]
    async fn the_caller_is_resolved_once_per_request() {
        let (state, _db) = testing::state().await;
        let mut parts = parts(None);
        parts.extensions.insert(Authenticated {
            principal: None,
            edge_reader: true,
        });
        let Caller(auth) = Caller::from_request_parts(&mut parts, &state)
            .await
            .unwrap();
        assert!(auth.edge_reader, "the resolved caller is reused");
    }

    #[tokio::test]
    async fn the_client_ip_is_the_trusted_proxys_last_hop_else_the_peer() {
        let (state, _db) = testing::state().await;
        let mut req = Request::builder()
            .header("x-forwarded-for", "203.0.113.9, 198.51.100.7")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        req.extensions
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 5], 40000))));
        let ClientIp(peer) = ClientIp::from_request_parts(&mut req, &state)
            .await
            .unwrap();
        assert_eq!(peer.as_deref(), Some("10.0.0.5"));
        let state = testing::with_auth(
            &state,
            AuthSettings {
                client_ip_header: Some(header::HeaderName::from_static("x-forwarded-for")),
                ..AuthSettings::default()
            },
        );
        let ClientIp(forwarded) = ClientIp::from_request_parts(&mut req, &state)
            .await
            .unwrap();
        assert_eq!(forwarded.as_deref(), Some("198.51.100.7"));
    }
}
