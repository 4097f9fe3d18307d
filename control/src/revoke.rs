//! The one guard every revocation shares: a credential is revoked (a user disabled) once.
//! The stamp is written only where none is yet, inside the caller's audited transaction, so
//! revoking an already-revoked thing, even in a race, neither moves the first stamp nor
//! records a second audit entry.

use sqlx::AnyConnection;

use crate::{sql, ControlError, Result};

/// What can be revoked: a row of one table whose stamp column is NULL while it is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revocable {
    ApiToken,
    EnrollmentToken,
    Node,
    Session,
    /// Disabling a user.
    User,
}

impl Revocable {
    fn table(self) -> &'static str {
        match self {
            Revocable::ApiToken => "api_tokens",
            Revocable::EnrollmentToken => "enrollment_tokens",
            Revocable::Node => "nodes",
            Revocable::Session => "sessions",
            Revocable::User => "users",
        }
    }

    fn stamp_column(self) -> &'static str {
        match self {
            Revocable::User => "disabled_at",
            _ => "revoked_at",
        }
    }

    /// The answer to revoking it again.
    pub(crate) fn already(self) -> ControlError {
        ControlError::Conflict(
            match self {
                Revocable::ApiToken | Revocable::EnrollmentToken => "that token is already revoked",
                Revocable::Node => "that node is already revoked",
                Revocable::Session => "that session is already ended",
                Revocable::User => "that user is already disabled",
            }
            .into(),
        )
    }
}

/// Stamps row `id` revoked at `now` unless it already is; returns whether it did (false:
/// already revoked, or no such row).
pub(crate) async fn stamp(
    conn: &mut AnyConnection,
    what: Revocable,
    id: &str,
    now: i64,
) -> Result<bool> {
    let (table, column) = (what.table(), what.stamp_column());
    let done = sqlx::query(sql!(
        "UPDATE {table} SET {column} = $1 WHERE id = $2 AND {column} IS NULL"
    ))
    .bind(now)
    .bind(id)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// [`stamp`], answering [`Revocable::already`] (409) when it was already revoked: the
/// caller's transaction then rolls back with nothing written or recorded. Callers read the
/// row first, so an unknown id has already been answered 404.
pub(crate) async fn once(
    conn: &mut AnyConnection,
    what: Revocable,
    id: &str,
    now: i64,
) -> Result<()> {
    if stamp(conn, what, id, now).await? {
        Ok(())
    } else {
        Err(what.already())
    }
}
