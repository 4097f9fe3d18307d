//! The HTTP boundary's error: every [`ControlError`] maps once to a status and a JSON body
//! `{"error": "..."}`. Internal causes are logged, never returned.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use vf_control::ControlError;

#[derive(Debug)]
pub struct ApiError(pub ControlError);

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> Self {
        ApiError(e)
    }
}

impl ApiError {
    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError(ControlError::invalid(field, message))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ControlError::Internal(_) = &self.0 {
            tracing::error!(error = self.0.chain(), "internal error");
        }
        let status =
            StatusCode::from_u16(self.0.status_code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            status,
            Json(serde_json::json!({ "error": self.0.to_string() })),
        )
            .into_response()
    }
}
