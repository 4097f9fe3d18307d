//! Sessions: a random token in an HttpOnly cookie, stored as its sha256 with an expiry;
//! signing out, disabling the user or resetting the password revokes it server-side.

use serde_json::json;

use super::limiter;
use super::{normalize_email, passwords, user_principal};
use crate::access::Principal;
use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::ids::{hash_matches, new_id, new_token, token_hash};
use crate::revoke::{self, Revocable};
use crate::{Control, ControlError, Db, Result};

/// The name of the session cookie.
pub const COOKIE: &str = "vf_session";

/// How long an ended session's row is kept.
const SESSION_HISTORY_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// A successful sign-in: the cookie value (shown to nobody else) and when it expires.
#[derive(Clone)]
pub struct SignedIn {
    pub token: String,
    pub expires_at: i64,
    pub email: String,
}

impl std::fmt::Debug for SignedIn {
    /// Never prints the session token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedIn")
            .field("token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .field("email", &self.email)
            .finish()
    }
}

/// Checks email and password (argon2id on the blocking pool) under the rate limits, then
/// opens a session. Wrong email and wrong password get the same answer.
pub async fn sign_in(
    ctl: &Control,
    email: &str,
    password: &str,
    ip: Option<&str>,
) -> Result<SignedIn> {
    let (user_id, email) = check_password(ctl, email, password, ip).await?;
    let signed_in = open_session(ctl, &user_id, email, ip).await?;
    ctl.metrics.sign_in("ok");
    Ok(signed_in)
}

/// Verifies an account's password under the sign-in rate limits (429 past them); returns
/// the user id and normalised email. Unknown, disabled and wrong all answer alike.
pub async fn check_password(
    ctl: &Control,
    email: &str,
    password: &str,
    ip: Option<&str>,
) -> Result<(String, String)> {
    let now = ctl.now();
    let email = normalize_email("email", email)?;
    let keys = limiter::keys(&email, ip);
    if let Err(retry_after_secs) = ctl.login_limiter.attempt(&keys, now) {
        tracing::warn!(email, ip, "sign-in refused: too many failed attempts");
        ctl.metrics.sign_in("locked");
        return Err(ControlError::TooManyAttempts { retry_after_secs });
    }
    let row: Option<(String, String, Option<i64>)> =
        sqlx::query_as("SELECT id, password_hash, disabled_at FROM users WHERE email = $1")
            .bind(&email)
            .fetch_optional(&ctl.db.pool)
            .await?;
    let matches = passwords::verify(password, row.as_ref().map(|r| r.1.as_str())).await?;
    let user_id = match row {
        Some((id, _, None)) if matches => id,
        _ => {
            ctl.metrics.sign_in("failed");
            tracing::warn!(email, ip, "sign-in failed");
            return Err(ControlError::invalid(
                "password",
                "that email and password do not match an enabled account",
            ));
        }
    };
    ctl.login_limiter.succeeded(&keys);
    Ok((user_id, email))
}

/// A new session for a user whose password was just checked.
async fn open_session(
    ctl: &Control,
    user_id: &str,
    email: String,
    ip: Option<&str>,
) -> Result<SignedIn> {
    let now = ctl.now();
    let token = new_token("vfs_");
    let expires_at = now + ctl.settings.session_ttl_ms;
    let id = new_id();
    let actor = Actor {
        name: email.clone(),
        ip: ip.map(str::to_string),
    };
    let mut tx = audit::begin(&ctl.db).await?;
    // Sessions long over are only history (the audit log keeps the sign-ins).
    sqlx::query("DELETE FROM sessions WHERE expires_at < $1")
        .bind(now - SESSION_HISTORY_MS)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO sessions (id, token_hash, user_id, ip, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&id)
    .bind(token_hash(&token))
    .bind(user_id)
    .bind(ip)
    .bind(now)
    .bind(expires_at)
    .execute(&mut *tx)
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor: &actor,
            action: AuditAction::SessionSignIn,
            target_id: &id,
            environment_id: None,
            details: json!({ "expires_at": expires_at }),
        },
    )
    .await?;
    Ok(SignedIn {
        token,
        expires_at,
        email,
    })
}

/// The principal of a live session; `None` when unknown, expired, revoked or disabled.
pub(crate) async fn resolve(
    db: &Db,
    token: &str,
    ip: Option<&str>,
    now: i64,
) -> Result<Option<Principal>> {
    type Row = (String, String, String, i64, Option<i64>, Option<i64>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT s.token_hash, u.id, u.email, s.expires_at, s.revoked_at, u.disabled_at
         FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1",
    )
    .bind(token_hash(token))
    .fetch_optional(&db.pool)
    .await?;
    let Some((hash, user_id, email, expires_at, revoked_at, disabled_at)) = row else {
        return Ok(None);
    };
    if !hash_matches(&hash, token)
        || revoked_at.is_some()
        || disabled_at.is_some()
        || now >= expires_at
    {
        return Ok(None);
    }
    Ok(Some(user_principal(db, &user_id, email, ip).await?))
}

/// Revokes the session of `token` (signing out). Unknown or already ended sessions are fine:
/// already out (nothing is changed or recorded).
pub async fn sign_out(db: &Db, token: &str, ip: Option<&str>, now: i64) -> Result<()> {
    let row: Option<(String, String)> = sqlx::query_as(
        "SELECT s.id, u.email FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = $1 AND s.revoked_at IS NULL",
    )
    .bind(token_hash(token))
    .fetch_optional(&db.pool)
    .await?;
    let Some((id, email)) = row else {
        return Ok(());
    };
    let actor = Actor {
        name: email,
        ip: ip.map(str::to_string),
    };
    let mut tx = audit::begin(db).await?;
    if !revoke::stamp(&mut tx, Revocable::Session, &id, now).await? {
        // Signed out meanwhile.
        return Ok(());
    }
    tx.commit(
        now,
        AuditEntry {
            actor: &actor,
            action: AuditAction::SessionSignOut,
            target_id: &id,
            environment_id: None,
            details: json!({}),
        },
    )
    .await?;
    Ok(())
}

/// Revokes every live session of a user inside the caller's transaction.
pub(crate) async fn revoke_all_in(
    conn: &mut sqlx::AnyConnection,
    user_id: &str,
    now: i64,
) -> Result<u64> {
    Ok(
        sqlx::query(
            "UPDATE sessions SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(user_id)
        .execute(conn)
        .await?
        .rows_affected(),
    )
}

/// Revokes every live session of a user (an admin signing someone out everywhere).
pub async fn revoke_user_sessions(db: &Db, actor: &Actor, user_id: &str, now: i64) -> Result<u64> {
    let email: String = sqlx::query_scalar("SELECT email FROM users WHERE id = $1")
        .bind(user_id)
        .fetch_optional(&db.pool)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("user {user_id}")))?;
    let mut tx = audit::begin(db).await?;
    let n = revoke_all_in(&mut tx, user_id, now).await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::UserSessionsRevoke,
            target_id: user_id,
            environment_id: None,
            details: json!({ "email": email, "sessions": n }),
        },
    )
    .await?;
    Ok(n)
}
