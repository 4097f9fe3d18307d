//! `EdgeClientOptions`: where the edge config lives, how to authenticate, how often to poll.

use std::fmt;
use std::time::Duration;

/// Where VectorFlow serves the edge config, relative to its base URL.
pub const EDGE_CONFIG_PATH: &str = "/api/edge-config";
/// How often the store polls unless told otherwise (SPEC: every 30 s).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(30);
/// How long one poll may take before it counts as failed.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How an [`crate::EdgeConfigStore`] reaches the edge config. Checked by
/// [`crate::EdgeConfigStore::start`], which refuses a bad URL or token up front rather than
/// failing every poll.
#[derive(Clone, PartialEq, Eq)]
pub struct EdgeClientOptions {
    /// Full URL of the document, e.g. `http://vectorflow:3000/api/edge-config`.
    pub url: String,
    /// The read-only token (`VF_EDGE_CONFIG_TOKEN` on the server), sent as a Bearer token.
    pub token: Option<String>,
    /// Time between polls; must be more than zero.
    pub poll_interval: Duration,
    /// Time one poll may take; must be more than zero.
    pub request_timeout: Duration,
}

impl EdgeClientOptions {
    /// Options for the document at `url`, with no token and the default interval and timeout.
    pub fn new(url: impl Into<String>) -> EdgeClientOptions {
        EdgeClientOptions {
            url: url.into(),
            token: None,
            poll_interval: DEFAULT_POLL_INTERVAL,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// Options for the VectorFlow server at `base_url` (`http://vectorflow:3000`): the document
    /// is at [`EDGE_CONFIG_PATH`] below it.
    pub fn for_server(base_url: &str) -> EdgeClientOptions {
        EdgeClientOptions::new(format!(
            "{}{EDGE_CONFIG_PATH}",
            base_url.trim_end_matches('/')
        ))
    }

    /// The same options, sending `token` as the read-only Bearer token.
    pub fn with_token(mut self, token: impl Into<String>) -> EdgeClientOptions {
        self.token = Some(token.into());
        self
    }
}

impl fmt::Debug for EdgeClientOptions {
    /// Never prints the token: it is a credential.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EdgeClientOptions")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("poll_interval", &self.poll_interval)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_for_a_server_point_at_its_edge_config_and_poll_every_thirty_seconds() {
        let options = EdgeClientOptions::for_server("http://vf:3000/");
        assert_eq!(options.url, "http://vf:3000/api/edge-config");
        assert_eq!(options.poll_interval, Duration::from_secs(30));
        assert_eq!(options.token, None);
    }

    #[test]
    fn debug_output_never_shows_the_token() {
        let options = EdgeClientOptions::new("http://vf/api/edge-config")
            .with_token("edge-secret-0123456789");
        let shown = format!("{options:?}");
        assert!(!shown.contains("edge-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }
}
