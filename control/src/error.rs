//! The service layer's one error type. Routes and server functions map it once to a status
//! code; internal causes are logged there, never shown to a client.

/// Every failure the service layer reports.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Bad input: `field` names what to fix.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("{0} not found")]
    NotFound(String),
    /// The request is valid but the current state forbids it (a release in flight, a lost
    /// compare-and-set race, a name already taken).
    #[error("{0}")]
    Conflict(String),
    #[error("invalid or revoked token")]
    Unauthorized,
    /// No session and no API token came with a request that needs one.
    #[error("sign in, or send an API token as Authorization: Bearer <token>")]
    SignInRequired,
    /// Authenticated, but the role held is not enough: the message names role and place.
    #[error("{0}")]
    Forbidden(String),
    /// Too many failed sign-ins; retry after this many seconds.
    #[error("too many failed sign-ins; try again in {}", minutes(*retry_after_secs))]
    TooManyAttempts { retry_after_secs: u64 },
    /// The version the caller saw (If-Match) is not the current one.
    #[error("{0}")]
    PreconditionFailed(String),
    /// A change to an existing object came without the version the caller saw.
    #[error("{0}")]
    PreconditionRequired(String),
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ControlError {
    /// The HTTP status every boundary (routes, server functions) answers this error with.
    pub fn status_code(&self) -> u16 {
        match self {
            ControlError::Invalid { .. } => 400,
            ControlError::Unauthorized | ControlError::SignInRequired => 401,
            ControlError::Forbidden(_) => 403,
            ControlError::TooManyAttempts { .. } => 429,
            ControlError::NotFound(_) => 404,
            ControlError::Conflict(_) => 409,
            ControlError::PreconditionFailed(_) => 412,
            ControlError::PreconditionRequired(_) => 428,
            ControlError::Internal(_) => 500,
        }
    }

    /// The whole story for a log line: an internal error's cause chain (which query, what the
    /// database said), the message itself for everything else. Never sent to a client.
    pub fn chain(&self) -> String {
        match self {
            ControlError::Internal(cause) => format!("{cause:#}"),
            other => other.to_string(),
        }
    }

    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl From<sqlx::Error> for ControlError {
    /// A unique violation that got past a function's own checks is a race with another
    /// request creating the same thing: a conflict, not a server error.
    fn from(e: sqlx::Error) -> Self {
        if e.as_database_error()
            .is_some_and(|d| d.is_unique_violation())
        {
            return Self::Conflict(
                "another request just created the same thing; reload and try again".into(),
            );
        }
        Self::Internal(anyhow::Error::new(e).context("database"))
    }
}

impl From<serde_json::Error> for ControlError {
    fn from(e: serde_json::Error) -> Self {
        Self::Internal(anyhow::Error::new(e).context("stored json"))
    }
}

/// Says what a database call was doing, so an internal error's cause chain names the query:
/// `.doing("summing pipeline_metrics.events_in")`.
pub trait Doing<T> {
    fn doing(self, what: impl std::fmt::Display) -> Result<T>;
}

impl<T> Doing<T> for std::result::Result<T, sqlx::Error> {
    fn doing(self, what: impl std::fmt::Display) -> Result<T> {
        self.map_err(|e| match ControlError::from(e) {
            ControlError::Internal(cause) => {
                ControlError::Internal(cause.context(what.to_string()))
            }
            other => other,
        })
    }
}

/// "1 minute", "15 minutes": a wait, rounded up to whole minutes.
fn minutes(secs: u64) -> String {
    match secs.div_ceil(60) {
        1 => "1 minute".to_string(),
        n => format!("{n} minutes"),
    }
}

pub type Result<T, E = ControlError> = std::result::Result<T, E>;
