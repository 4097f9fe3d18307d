//! OpAMP over plain HTTP (SPEC section 4): `POST /v1/opamp`, a protobuf `AgentToServer` in,
//! a `ServerToAgent` out. Thin: authenticate, read the body, call `vf_control::opamp`,
//! answer. A body that does not decode gets a BAD_REQUEST `error_response` with HTTP 200,
//! as the OpAMP spec asks, so clients do not retry it.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use vf_control::opamp::prost::Message;
use vf_control::opamp::proto::{
    AgentToServer, ServerErrorResponse, ServerErrorResponseType, ServerToAgent,
};
use vf_control::opamp::transport::{self, BodyError};
use vf_control::{opamp, ControlError};

use crate::auth::bearer;
use crate::config::Config;
use crate::state::AppState;

/// The OpAMP default path.
const ROUTE: &str = "/v1/opamp";

/// The largest request body once decompressed (`VF_AGENT_MAX_BODY_BYTES`).
#[derive(Debug, Clone, Copy)]
struct MaxBody(usize);

/// The OpAMP route with the agent routes' protections (30 s `Retry-After`: OpAMP clients
/// honour it) and its own decompressed-size limit.
pub fn router(config: &Config, state: &AppState) -> Router<AppState> {
    let routes = Router::new()
        .route(ROUTE, post(opamp_post))
        .layer(Extension(MaxBody(config.agent_max_body_bytes)));
    super::agent_route_layers(routes, state, config, "30")
}

fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
    )
        .into_response()
}

/// A `ServerToAgent` as the body: exactly `application/x-protobuf`, gzipped when the
/// client's `Accept-Encoding` allows it.
fn protobuf(request: &HeaderMap, status: StatusCode, message: &ServerToAgent) -> Response {
    let bytes = message.encode_to_vec();
    let mut resp = if transport::accepts_gzip(text(request, header::ACCEPT_ENCODING)) {
        let mut r = (status, transport::gzip(&bytes)).into_response();
        r.headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        r
    } else {
        (status, bytes).into_response()
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(transport::PROTOBUF),
    );
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    resp
}

/// Internal failures are logged with their cause; the agent gets a generic UNKNOWN error.
fn internal(request: &HeaderMap, cause: ControlError) -> Response {
    tracing::error!(error = cause.chain(), "OpAMP exchange failed");
    let message = ServerToAgent {
        error_response: Some(ServerErrorResponse {
            r#type: ServerErrorResponseType::Unknown as i32,
            error_message: "internal error".into(),
            details: None,
        }),
        ..ServerToAgent::default()
    };
    protobuf(request, StatusCode::INTERNAL_SERVER_ERROR, &message)
}

async fn opamp_post(
    State(state): State<AppState>,
    Extension(MaxBody(limit)): Extension<MaxBody>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(token) = bearer(&headers) else {
        return unauthorized();
    };
    let ctl = &state.control;
    let env = match opamp::authenticate(&ctl.db, token).await {
        Ok(env) => env,
        Err(ControlError::Unauthorized) => return unauthorized(),
        Err(e) => return internal(&headers, e),
    };
    if !transport::is_protobuf(text(&headers, header::CONTENT_TYPE)) {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "OpAMP over HTTP takes Content-Type: {}",
                transport::PROTOBUF
            ),
        )
            .into_response();
    }
    let raw = match transport::decode_body(text(&headers, header::CONTENT_ENCODING), &body, limit) {
        Ok(raw) => raw,
        Err(e @ BodyError::TooLarge(_)) => {
            return protobuf(
                &headers,
                StatusCode::PAYLOAD_TOO_LARGE,
                &opamp::bad_request(&[], &e.to_string()),
            )
        }
        Err(e @ BodyError::UnsupportedEncoding(_)) => {
            return (StatusCode::UNSUPPORTED_MEDIA_TYPE, e.to_string()).into_response()
        }
        Err(e @ BodyError::Corrupt(_)) => {
            return protobuf(
                &headers,
                StatusCode::OK,
                &opamp::bad_request(&[], &e.to_string()),
            )
        }
    };
    let message = match AgentToServer::decode(raw.as_slice()) {
        Ok(m) => m,
        Err(e) => {
            let text = format!("the body is not an AgentToServer message: {e}");
            return protobuf(&headers, StatusCode::OK, &opamp::bad_request(&[], &text));
        }
    };
    match opamp::exchange(ctl, &env, &message).await {
        Ok(exchange) => {
            for kind in exchange.served {
                state.metrics.served(kind);
            }
            protobuf(&headers, StatusCode::OK, &exchange.reply)
        }
        Err(ControlError::Unauthorized) => unauthorized(),
        Err(e @ ControlError::Invalid { .. }) => protobuf(
            &headers,
            StatusCode::OK,
            &opamp::bad_request(&message.instance_uid, &e.to_string()),
        ),
        Err(e) => internal(&headers, e),
    }
}
