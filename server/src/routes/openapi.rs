//! `GET /api/openapi.json`: the API description, built once from the server functions'
//! types and the catalog of who may call them (`app::api::openapi`). It describes, it grants
//! nothing, so it needs no sign-in: tools fetch it to generate clients.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/openapi.json", get(openapi))
}

async fn openapi() -> impl IntoResponse {
    static DOCUMENT: LazyLock<String> = LazyLock::new(|| app::api::openapi::document().to_string());
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
}
