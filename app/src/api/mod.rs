//! Server functions: the app's API. Endpoint names are stable (automation calls them with
//! JSON at `/api/<endpoint>`); each function authenticates, parses, calls `vf-control`, and
//! maps errors once.

pub mod accounts;
pub mod audit;
#[cfg(feature = "ssr")]
pub mod catalog;
pub mod channel;
pub mod edge;
pub mod fleet;
pub mod freeze;
#[cfg(feature = "ssr")]
pub mod openapi;
pub mod pipelines;
pub mod releases;
#[cfg(feature = "ssr")]
mod server;
pub mod webhooks;

use leptos::prelude::ServerFnError;

/// The message to show for a failed server call, without the framework's prefix.
pub fn error_text(e: &ServerFnError) -> String {
    match e {
        ServerFnError::ServerError(m) => m.clone(),
        other => other.to_string(),
    }
}
