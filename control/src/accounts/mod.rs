//! Operator accounts: users with roles per environment, sessions, API tokens, the first
//! start's admin, and [`authenticate`], which turns a request's session cookie or bearer
//! token into a [`Principal`]. What a principal may do is decided in [`crate::access`].

pub mod limiter;
pub mod passwords;
pub mod sessions;
pub mod tokens;

use serde_json::json;

use crate::access::{Grant, Identity, Principal, Role, ALL_ENVIRONMENTS};
use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::ids::{hash_matches, new_id, new_token, token_hash};
use crate::revoke::{self, Revocable};
use crate::{ControlError, Db, Result};

pub use sessions::{sign_in, sign_out, SignedIn};
pub use tokens::{create_api_token, list_api_tokens, revoke_api_token, ApiTokenRow, TokenRole};

/// A stored user (never with its password hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub email: String,
    pub created_at: i64,
    pub disabled_at: Option<i64>,
    pub grants: Vec<Grant>,
}

/// What a request proved about its caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Authenticated {
    /// A live session or API token with roles.
    pub principal: Option<Principal>,
    /// The read-only edge-config token: reads `GET /api/edge-config` and nothing else.
    pub edge_reader: bool,
}

/// Resolves a session cookie and/or a bearer token. Unknown, expired or revoked credentials
/// authenticate nobody (the caller then gets 401 where it needs someone).
pub async fn authenticate(
    db: &Db,
    session_token: Option<&str>,
    bearer: Option<&str>,
    ip: Option<&str>,
    now: i64,
) -> Result<Authenticated> {
    if let Some(token) = bearer {
        return tokens::resolve(db, token, ip, now).await;
    }
    if let Some(token) = session_token {
        let principal = sessions::resolve(db, token, ip, now).await?;
        return Ok(Authenticated {
            principal,
            edge_reader: false,
        });
    }
    Ok(Authenticated::default())
}

/// Trims and lowercases an email, refusing what cannot be one.
pub fn normalize_email(field: &str, raw: &str) -> Result<String> {
    let email = raw.trim().to_lowercase();
    let valid = email.len() <= 254
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty())
        // No ':' (never in real addresses): `token:<name>` names API tokens in the audit log.
        && !email.chars().any(|c| c.is_whitespace() || c.is_control() || c == ':');
    if !valid {
        return Err(ControlError::invalid(
            field,
            "must be an email address like ops@example.com",
        ));
    }
    Ok(email)
}

/// Checks grants: roles parse, environments exist (or are `*`), one grant per environment.
pub async fn validate_grants(db: &Db, grants: &[Grant]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, g) in grants.iter().enumerate() {
        let field = format!("grants[{i}].environment_id");
        if !seen.insert(g.environment_id.clone()) {
            return Err(ControlError::invalid(
                field,
                "appears twice; give one role per environment",
            ));
        }
        if g.environment_id == ALL_ENVIRONMENTS {
            continue;
        }
        let exists = sqlx::query_scalar::<_, String>("SELECT id FROM environments WHERE id = $1")
            .bind(&g.environment_id)
            .fetch_optional(&db.pool)
            .await?
            .is_some();
        if !exists {
            return Err(ControlError::invalid(
                field,
                format!(
                    "no environment with id {:?} (use \"*\" for all)",
                    g.environment_id
                ),
            ));
        }
    }
    Ok(())
}

/// Creates a user with `grants`. Emails are unique (409).
pub async fn create_user(
    db: &Db,
    actor: &Actor,
    email: &str,
    password: &str,
    grants: &[Grant],
    now: i64,
) -> Result<User> {
    let email = normalize_email("email", email)?;
    passwords::validate("password", password)?;
    validate_grants(db, grants).await?;
    let taken = sqlx::query_scalar::<_, String>("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_optional(&db.pool)
        .await?
        .is_some();
    if taken {
        return Err(ControlError::Conflict(format!(
            "a user with email {email} exists"
        )));
    }
    let hash = passwords::hash(password).await?;
    let id = new_id();
    let mut tx = audit::begin(db).await?;
    sqlx::query(
        "INSERT INTO users (id, email, password_hash, created_by, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&id)
    .bind(&email)
    .bind(&hash)
    .bind(&actor.name)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    write_grants(&mut tx, &id, grants).await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::UserCreate,
            target_id: &id,
            environment_id: None,
            details: json!({ "email": email, "grants": grants }),
        },
    )
    .await?;
    Ok(User {
        id,
        email,
        created_at: now,
        disabled_at: None,
        grants: grants.to_vec(),
    })
}

async fn write_grants(tx: &mut sqlx::AnyConnection, user_id: &str, grants: &[Grant]) -> Result<()> {
    sqlx::query("DELETE FROM role_grants WHERE user_id = $1")
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    for g in grants {
        sqlx::query("INSERT INTO role_grants (user_id, environment_id, role) VALUES ($1, $2, $3)")
            .bind(user_id)
            .bind(&g.environment_id)
            .bind(g.role.as_str())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// A user's grants.
pub async fn grants_of(db: &Db, user_id: &str) -> Result<Vec<Grant>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT environment_id, role FROM role_grants WHERE user_id = $1 ORDER BY environment_id",
    )
    .bind(user_id)
    .fetch_all(&db.pool)
    .await?;
    rows.into_iter()
        .map(|(environment_id, role)| {
            Ok(Grant {
                environment_id,
                role: crate::access::parse_role("role", &role)?,
            })
        })
        .collect()
}

/// Every user with their grants, by email.
pub async fn list_users(db: &Db) -> Result<Vec<User>> {
    let rows: Vec<(String, String, i64, Option<i64>)> =
        sqlx::query_as("SELECT id, email, created_at, disabled_at FROM users ORDER BY email")
            .fetch_all(&db.pool)
            .await?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, email, created_at, disabled_at) in rows {
        let grants = grants_of(db, &id).await?;
        out.push(User {
            id,
            email,
            created_at,
            disabled_at,
            grants,
        });
    }
    Ok(out)
}

async fn get_user(db: &Db, user_id: &str) -> Result<User> {
    let (id, email, created_at, disabled_at): (String, String, i64, Option<i64>) =
        sqlx::query_as("SELECT id, email, created_at, disabled_at FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(&db.pool)
            .await?
            .ok_or_else(|| ControlError::NotFound(format!("user {user_id}")))?;
    let grants = grants_of(db, &id).await?;
    Ok(User {
        id,
        email,
        created_at,
        disabled_at,
        grants,
    })
}

/// The advisory lock key serialising changes to who administers everything (PostgreSQL;
/// "vf-admin" in ASCII). SQLite's single connection already serialises them.
const ADMINS_LOCK: i64 = 0x7666_2d61_646d_696e;

/// Taken first in a transaction that may remove an admin of every environment.
async fn lock_admins(conn: &mut sqlx::AnyConnection) -> Result<()> {
    if conn.backend_name() == "PostgreSQL" {
        sqlx::query(crate::sql!("SELECT pg_advisory_xact_lock({ADMINS_LOCK})"))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

fn is_global_admin(grants: &[Grant]) -> bool {
    crate::access::role_in(grants, ALL_ENVIRONMENTS) == Some(Role::Admin)
}

/// Checked inside the transaction, after the change: refuses (and so rolls back) a change
/// that leaves no enabled admin of every environment, since nobody could then manage users
/// or tokens.
async fn ensure_an_admin_remains(conn: &mut sqlx::AnyConnection, field: &str) -> Result<()> {
    let admins: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM users u JOIN role_grants g ON g.user_id = u.id
         WHERE u.disabled_at IS NULL AND g.environment_id = '*' AND g.role = 'admin'",
    )
    .fetch_one(&mut *conn)
    .await?;
    if admins == 0 {
        return Err(ControlError::invalid(
            field,
            "this is the last enabled admin of every environment; make someone else admin first",
        ));
    }
    Ok(())
}

/// Replaces a user's grants.
pub async fn set_grants(
    db: &Db,
    actor: &Actor,
    user_id: &str,
    grants: &[Grant],
    now: i64,
) -> Result<User> {
    let before = get_user(db, user_id).await?;
    validate_grants(db, grants).await?;
    let mut tx = audit::begin(db).await?;
    lock_admins(&mut tx).await?;
    write_grants(&mut tx, user_id, grants).await?;
    if is_global_admin(&before.grants) && !is_global_admin(grants) {
        ensure_an_admin_remains(&mut tx, "grants").await?;
    }
    // Tokens the user minted never outrank them.
    let revoked = tokens::revoke_beyond(&mut tx, &before.email, Some(grants), now).await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::UserGrantsSet,
            target_id: user_id,
            environment_id: None,
            details: json!({
                "email": before.email,
                "before": before.grants,
                "after": grants,
                "revoked_api_tokens": revoked,
            }),
        },
    )
    .await?;
    get_user(db, user_id).await
}

/// Disables a user (or enables one again). Disabling revokes every session at once.
/// Disabling a disabled user, or enabling an enabled one, is a conflict that changes and
/// records nothing (the first disable's time stays).
pub async fn set_disabled(
    db: &Db,
    actor: &Actor,
    user_id: &str,
    disabled: bool,
    now: i64,
) -> Result<User> {
    let before = get_user(db, user_id).await?;
    let mut tx = audit::begin(db).await?;
    lock_admins(&mut tx).await?;
    if disabled {
        revoke::once(&mut tx, Revocable::User, user_id, now).await?;
    } else {
        let enabled = sqlx::query(
            "UPDATE users SET disabled_at = NULL WHERE id = $1 AND disabled_at IS NOT NULL",
        )
        .bind(user_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if enabled != 1 {
            return Err(ControlError::Conflict(
                "that user is already enabled".into(),
            ));
        }
    }
    let mut revoked = Vec::new();
    if disabled {
        if is_global_admin(&before.grants) {
            ensure_an_admin_remains(&mut tx, "user_id").await?;
        }
        sessions::revoke_all_in(&mut tx, user_id, now).await?;
        // Nothing a disabled user minted keeps working.
        revoked = tokens::revoke_beyond(&mut tx, &before.email, None, now).await?;
    }
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: if disabled {
                AuditAction::UserDisable
            } else {
                AuditAction::UserEnable
            },
            target_id: user_id,
            environment_id: None,
            details: json!({ "email": before.email, "revoked_api_tokens": revoked }),
        },
    )
    .await?;
    get_user(db, user_id).await
}

/// Sets a new password and revokes the user's sessions (an admin's reset, or your own).
pub async fn set_password(
    db: &Db,
    actor: &Actor,
    user_id: &str,
    password: &str,
    now: i64,
) -> Result<()> {
    passwords::validate("password", password)?;
    let user = get_user(db, user_id).await?;
    let hash = passwords::hash(password).await?;
    let mut tx = audit::begin(db).await?;
    sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
        .bind(&hash)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    sessions::revoke_all_in(&mut tx, user_id, now).await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::UserPasswordSet,
            target_id: user_id,
            environment_id: None,
            details: json!({ "email": user.email }),
        },
    )
    .await?;
    Ok(())
}

/// Whether any user exists (a first start has none).
pub async fn has_users(db: &Db) -> Result<bool> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
        .fetch_one(&db.pool)
        .await?;
    Ok(n > 0)
}

/// First start: with no users yet, creates `email` as admin of every environment. Returns
/// whether it did (a database that has users is left alone).
pub async fn bootstrap_admin(db: &Db, email: &str, password: &str, now: i64) -> Result<bool> {
    if has_users(db).await? {
        return Ok(false);
    }
    let grants = [Grant {
        environment_id: ALL_ENVIRONMENTS.into(),
        role: Role::Admin,
    }];
    match create_user(db, &Actor::system("system"), email, password, &grants, now).await {
        Ok(_) => Ok(true),
        // Another replica starting on the same database created it first.
        Err(ControlError::Conflict(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// How long a setup link stays valid.
pub const SETUP_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// First start without `VF_ADMIN_EMAIL`: a one-time setup token (replacing any earlier
/// one) to print as a link. `None` once a user exists.
pub async fn prepare_setup(db: &Db, now: i64) -> Result<Option<String>> {
    if has_users(db).await? {
        return Ok(None);
    }
    let token = new_token("vfu_");
    let mut tx = db.pool.begin().await?;
    sqlx::query("DELETE FROM setup_tokens")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO setup_tokens (token_hash, created_at, expires_at) VALUES ($1, $2, $3)",
    )
    .bind(token_hash(&token))
    .bind(now)
    .bind(now + SETUP_TTL_MS)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(token))
}

/// Completes the setup link: creates the first admin. The token works once, within its day,
/// and only while no user exists.
pub async fn complete_setup(
    db: &Db,
    token: &str,
    email: &str,
    password: &str,
    ip: Option<&str>,
    now: i64,
) -> Result<User> {
    let stored: Option<(String, i64, Option<i64>)> = sqlx::query_as(
        "SELECT token_hash, expires_at, used_at FROM setup_tokens WHERE token_hash = $1",
    )
    .bind(token_hash(token))
    .fetch_optional(&db.pool)
    .await?;
    let usable = stored.is_some_and(|(hash, expires_at, used_at)| {
        hash_matches(&hash, token) && used_at.is_none() && now < expires_at
    });
    if !usable || has_users(db).await? {
        return Err(ControlError::invalid(
            "token",
            "this setup link is invalid, used or expired; restart the server for a new one",
        ));
    }
    // Bad input leaves the link usable, so the operator can correct it and submit again.
    normalize_email("email", email)?;
    passwords::validate("password", password)?;
    // Claim the link before creating anyone: of two racing submissions only one gets it.
    let claimed = sqlx::query(
        "UPDATE setup_tokens SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL",
    )
    .bind(now)
    .bind(token_hash(token))
    .execute(&db.pool)
    .await?
    .rows_affected();
    if claimed != 1 {
        return Err(ControlError::invalid(
            "token",
            "this setup link is invalid, used or expired; restart the server for a new one",
        ));
    }
    let grants = [Grant {
        environment_id: ALL_ENVIRONMENTS.into(),
        role: Role::Admin,
    }];
    let actor = Actor {
        name: "setup".into(),
        ip: ip.map(str::to_string),
    };
    create_user(db, &actor, email, password, &grants, now).await
}

/// The principal of a user id (sessions resolve through this).
pub(crate) async fn user_principal(
    db: &Db,
    user_id: &str,
    email: String,
    ip: Option<&str>,
) -> Result<Principal> {
    Ok(Principal {
        identity: Identity::User {
            id: user_id.to_string(),
            email,
        },
        grants: grants_of(db, user_id).await?,
        ip: ip.map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_or_refused_naming_the_field() {
        assert_eq!(
            normalize_email("email", "  Ops@Example.COM ").unwrap(),
            "ops@example.com"
        );
        for bad in [
            "",
            "ops",
            "@example.com",
            "ops@",
            "o ps@example.com",
            "token:ci@example.com",
        ] {
            assert_eq!(
                normalize_email("email", bad).unwrap_err().to_string(),
                "email: must be an email address like ops@example.com",
                "{bad:?}"
            );
        }
    }
}
