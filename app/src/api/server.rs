//! Server-side helpers of the server functions.

use axum::http::StatusCode;
use leptos::prelude::*;
use leptos_axum::ResponseOptions;
use vf_control::{Control, ControlError};

/// The service handle provided by the server for every request.
pub fn control() -> Result<Control, ServerFnError> {
    use_context::<Control>().ok_or_else(|| ServerFnError::new("server context is missing"))
}

/// Who acts. Until accounts exist every operator acts as "operator".
pub fn actor() -> String {
    "operator".to_string()
}

/// Maps a service error to a status code and a message the page can show. Internal causes
/// are logged here and never shown.
pub fn fail(e: ControlError) -> ServerFnError {
    if let ControlError::Internal(cause) = &e {
        tracing::error!(error = format!("{cause:#}"), "server function failed");
    }
    let status = StatusCode::from_u16(e.status_code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Some(resp) = use_context::<ResponseOptions>() {
        resp.set_status(status);
    }
    ServerFnError::new(e.to_string())
}
