//! The web app's server functions as routes of their own (`POST /api/<name>`, one per
//! registered function), so that they carry what they need and nothing the pages need: the
//! caller resolved onto the request (server functions cannot take axum extractors, so
//! `app::api::server::principal` reads the [`Caller`] from the request's parts), and
//! arguments that do not decode answered as the client's fault.

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{on, MethodFilter};
use axum::Router;
use leptos::server_fn::error::{ServerFnErrorEncoding, SERVER_FN_ERROR_HEADER};
use leptos::server_fn::{Decodes, ServerFnError};

use crate::extract::Caller;
use crate::state::AppState;

/// The largest server-function error body that is decoded to classify it (error messages are
/// short; a longer body is left as it is).
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// A route per registered server function, each run by leptos with `context` provided (the
/// same context the pages provide, so a function behaves alike called from a page's
/// rendering or over HTTP).
pub fn router(
    state: &AppState,
    context: impl Fn() + Clone + Send + Sync + 'static,
) -> anyhow::Result<Router<AppState>> {
    let mut router = Router::new();
    for (path, method) in leptos::server_fn::axum::server_fn_paths() {
        let filter = MethodFilter::try_from(method.clone()).map_err(|e| {
            anyhow::anyhow!("server function {path} uses HTTP method {method}: {e}")
        })?;
        let state = state.clone();
        let context = context.clone();
        let handler = move |req: Request| {
            let state = state.clone();
            let context = context.clone();
            async move {
                leptos_axum::handle_server_fns_with_context(
                    move || {
                        leptos::prelude::provide_context(state.clone());
                        context();
                    },
                    req,
                )
                .await
            }
        };
        router = router.route(path, on(filter, handler));
    }
    Ok(router
        .layer(middleware::from_fn(argument_errors_are_400))
        .layer(middleware::from_extractor_with_state::<Caller, AppState>(
            state.clone(),
        )))
}

/// Leptos answers a call whose arguments do not decode with a 500 (`error_response`, marked
/// by the `serverfnerror` header); for the caller that is bad input, so it becomes a 400
/// with the same body. The body is decoded with server_fn's own error encoding; what the
/// functions themselves fail with (`ServerError`) keeps its status.
async fn argument_errors_are_400(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    if resp.status() != StatusCode::INTERNAL_SERVER_ERROR
        || !resp.headers().contains_key(SERVER_FN_ERROR_HEADER)
    {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = to_bytes(body, ERROR_BODY_LIMIT).await else {
        tracing::warn!("a server function's error body was unreadable or too long");
        return Response::from_parts(parts, Body::empty());
    };
    if is_argument_error(&bytes) {
        parts.status = StatusCode::BAD_REQUEST;
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// Whether a server function's encoded error says its arguments were missing or did not
/// decode (`Args`, `MissingArg`, and `Deserialization`, which the body codecs report).
fn is_argument_error(body: &bytes::Bytes) -> bool {
    let decoded: Result<ServerFnError, _> = ServerFnErrorEncoding::decode(body.clone());
    matches!(
        decoded,
        Ok(ServerFnError::Args(_)
            | ServerFnError::MissingArg(_)
            | ServerFnError::Deserialization(_))
    )
}

#[cfg(test)]
mod tests {
    use leptos::server_fn::error::FromServerFnError;
    use leptos::server_fn::error::ServerFnErrorErr;

    use super::*;

    fn encoded(e: ServerFnErrorErr) -> bytes::Bytes {
        <ServerFnError as FromServerFnError>::from_server_fn_error(e).ser()
    }

    #[test]
    fn arguments_that_do_not_decode_are_the_callers_fault_failures_of_the_function_are_not() {
        for e in [
            ServerFnErrorErr::Args("missing field `config_yaml`".into()),
            ServerFnErrorErr::MissingArg("config_yaml".into()),
            ServerFnErrorErr::Deserialization("expected a string".into()),
        ] {
            assert!(is_argument_error(&encoded(e.clone())), "{e:?}");
        }
        for e in [
            ServerFnErrorErr::ServerError("Args|looks like one".into()),
            ServerFnErrorErr::Response("could not build".into()),
            ServerFnErrorErr::MiddlewareError("x".into()),
        ] {
            assert!(!is_argument_error(&encoded(e.clone())), "{e:?}");
        }
        assert!(
            !is_argument_error(&bytes::Bytes::from_static(b"not an encoded error")),
            "a body server_fn cannot decode is not read as one"
        );
    }
}
