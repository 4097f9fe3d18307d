//! The one error type of the agent library, so callers (the CLI loop, the server's tests) can
//! tell "back off slowly", "honour Retry-After" and "give up" apart without parsing strings.

use std::{path::PathBuf, time::Duration};

/// Why enrolling or polling failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No identity is stored yet and no enrollment token was given.
    #[error(
        "no node identity in {0} and no enrollment token (--token / VF_AGENT_TOKEN) to enroll with"
    )]
    MissingEnrollmentToken(PathBuf),
    /// The server refused the enrollment token: retrying will not help.
    #[error("the server rejected the enrollment token (401)")]
    EnrollmentRejected,
    /// The server refused the node token: it was revoked or the node was deleted.
    #[error("the server rejected this node's token (401): it was revoked or the node was deleted")]
    Unauthorized,
    /// 429 or 503: the server asked us to come back later.
    #[error("the server is overloaded ({status}), retry after {retry_after:?}")]
    Overloaded {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// Any other non-success answer.
    #[error("the server answered {status}: {body}")]
    Status { status: u16, body: String },
    /// The server could not be reached or answered with a body we cannot parse.
    #[error("request to the server failed: {0}")]
    Transport(#[from] reqwest::Error),
    /// Local state (identity file, data directory) could not be read or written.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The stored identity file exists but cannot be parsed.
    #[error("the identity file {path} is corrupt ({source}); remove it to enroll again")]
    CorruptIdentity {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A simulation template (hostname or label value) is malformed.
    #[error(transparent)]
    Template(#[from] crate::template::TemplateError),
}

impl AgentError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        AgentError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result alias for the agent library.
pub type Result<T, E = AgentError> = std::result::Result<T, E>;
