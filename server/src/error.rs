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
        let status = match &self.0 {
            ControlError::Invalid { .. } => StatusCode::BAD_REQUEST,
            ControlError::NotFound(_) => StatusCode::NOT_FOUND,
            ControlError::Conflict(_) => StatusCode::CONFLICT,
            ControlError::Unauthorized => StatusCode::UNAUTHORIZED,
            ControlError::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            ControlError::PreconditionRequired(_) => StatusCode::PRECONDITION_REQUIRED,
            ControlError::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "internal error");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        (
            status,
            Json(serde_json::json!({ "error": self.0.to_string() })),
        )
            .into_response()
    }
}
