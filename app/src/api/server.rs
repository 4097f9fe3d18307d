//! Server-side helpers of the server functions: every one starts with [`authorize`].

use axum::http::StatusCode;
use leptos::prelude::*;
use leptos_axum::ResponseOptions;
use vf_control::access::{self, Granted, Principal, Role, Target};
use vf_control::accounts::Authenticated;
use vf_control::{Control, ControlError};

/// The service handle provided by the server for every request.
pub fn control() -> Result<Control, ServerFnError> {
    use_context::<Control>().ok_or_else(|| ServerFnError::new("server context is missing"))
}

/// Who is calling: the server's authentication middleware put it on the request.
pub fn principal() -> Option<Principal> {
    use_context::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Authenticated>().cloned())
        .and_then(|a| a.principal)
}

/// The one door of every server function: the caller must hold `need` where `target` lives
/// (401 without a session or token, 403 with too low a role). Returns the service handle and
/// what was granted (the actor to record and the role held there).
pub async fn authorize(
    need: Role,
    target: Target<'_>,
) -> Result<(Control, Granted), ServerFnError> {
    let ctl = control()?;
    let granted = access::authorize(&ctl.db, principal().as_ref(), need, target)
        .await
        .map_err(fail)?;
    Ok((ctl, granted))
}

/// Maps a service error to a status code and a message the page can show. Internal causes
/// are logged here and never shown.
pub fn fail(e: ControlError) -> ServerFnError {
    if let ControlError::Internal(_) = &e {
        tracing::error!(error = e.chain(), "server function failed");
    }
    let status = StatusCode::from_u16(e.status_code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Some(resp) = use_context::<ResponseOptions>() {
        resp.set_status(status);
        if let ControlError::TooManyAttempts { retry_after_secs } = &e {
            if let Ok(v) = axum::http::HeaderValue::from_str(&retry_after_secs.to_string()) {
                resp.insert_header(axum::http::header::RETRY_AFTER, v);
            }
        }
    }
    ServerFnError::new(e.to_string())
}
