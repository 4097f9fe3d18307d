//! Why a store could not start, and why one poll failed.

use std::error::Error;
use std::time::Duration;

/// [`crate::EdgeConfigStore::start`] refused its options; nothing was spawned.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("edge config url {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("edge config token: must be printable ASCII without spaces or newlines")]
    BadToken,
    #[error("edge config {0} must be more than zero")]
    ZeroDuration(&'static str),
    #[error("EdgeConfigStore::start must be called inside a tokio runtime")]
    NoRuntime,
    #[error("building the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// One poll failed. The store keeps serving the config it had and reports itself unhealthy
/// with this error's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PollError {
    #[error("edge config request timed out after {0:?}")]
    Timeout(Duration),
    #[error("edge config server unreachable: {0}")]
    Unreachable(String),
    #[error("edge config server answered 401 Unauthorized: check the read-only token")]
    Unauthorized,
    #[error("edge config server answered HTTP {0}")]
    Status(u16),
    #[error("edge config document is not valid: {0}")]
    BadDocument(String),
    #[error("edge config server answered 304 Not Modified to a request without If-None-Match")]
    UnexpectedNotModified,
    /// Versions only grow; an older one means a lagging replica or a reset database, which
    /// must not silently roll every customer back.
    #[error("edge config server sent version {got}, older than version {serving} being served; keeping {serving}")]
    OlderVersion { got: i64, serving: i64 },
}

impl PollError {
    /// Classifies a transport error: timeouts apart, everything else with its cause chain
    /// (reqwest's own message alone rarely says "connection refused").
    pub(crate) fn from_reqwest(error: &reqwest::Error, timeout: Duration) -> PollError {
        if error.is_timeout() {
            return PollError::Timeout(timeout);
        }
        let mut message = error.to_string();
        let mut cause = error.source();
        while let Some(inner) = cause {
            message.push_str(": ");
            message.push_str(&inner.to_string());
            cause = inner.source();
        }
        PollError::Unreachable(message)
    }
}
