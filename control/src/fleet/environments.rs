//! Environments (fleet boundaries) and their agent enrollment tokens.

use serde_json::json;

use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::ids::{given_or_new_token, hash_matches, new_id, shown_prefix, token_hash};
use crate::revoke::{self, Revocable};
use crate::{ControlError, Db, Result};

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Environment {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

/// An enrollment token as listed: never the token itself, only its prefix.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct EnrollmentTokenRow {
    pub id: String,
    pub environment_id: String,
    pub prefix: String,
    pub label: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// Environment names are short slugs: they appear in URLs, logs and labels.
pub fn parse_environment_name(name: &str) -> Result<String> {
    let name = name.trim();
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(name.to_string())
    } else {
        Err(ControlError::invalid(
            "name",
            "1-64 characters of letters, digits, '-' or '_'",
        ))
    }
}

pub async fn list_environments(db: &Db) -> Result<Vec<Environment>> {
    Ok(sqlx::query_as::<_, Environment>(
        "SELECT id, name, created_at FROM environments ORDER BY name",
    )
    .fetch_all(&db.pool)
    .await?)
}

pub async fn get_environment(db: &Db, id: &str) -> Result<Environment> {
    sqlx::query_as::<_, Environment>("SELECT id, name, created_at FROM environments WHERE id = $1")
        .bind(id)
        .fetch_optional(&db.pool)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("environment {id}")))
}

async fn find_environment_by_name(db: &Db, name: &str) -> Result<Option<Environment>> {
    Ok(sqlx::query_as::<_, Environment>(
        "SELECT id, name, created_at FROM environments WHERE name = $1",
    )
    .bind(name)
    .fetch_optional(&db.pool)
    .await?)
}

/// Creates an environment; a taken name is a conflict.
pub async fn create_environment(
    db: &Db,
    actor: &Actor,
    name: &str,
    now: i64,
) -> Result<Environment> {
    let name = parse_environment_name(name)?;
    if find_environment_by_name(db, &name).await?.is_some() {
        return Err(ControlError::Conflict(format!(
            "an environment named {name} already exists"
        )));
    }
    let env = Environment {
        id: new_id(),
        name,
        created_at: now,
    };
    let mut tx = audit::begin(db).await?;
    sqlx::query("INSERT INTO environments (id, name, created_at) VALUES ($1, $2, $3)")
        .bind(&env.id)
        .bind(&env.name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::EnvironmentCreate,
            target_id: &env.id,
            environment_id: Some(&env.id),
            details: json!({ "name": env.name }),
        },
    )
    .await?;
    Ok(env)
}

/// The environment with this name, created if missing (start-up bootstrap; idempotent).
pub async fn ensure_environment(db: &Db, name: &str, now: i64) -> Result<Environment> {
    let name = parse_environment_name(name)?;
    if let Some(env) = find_environment_by_name(db, &name).await? {
        return Ok(env);
    }
    match create_environment(db, &Actor::system("system"), &name, now).await {
        // Another replica created it between our read and our write.
        Err(ControlError::Conflict(_)) | Err(ControlError::Internal(_)) => {
            find_environment_by_name(db, &name)
                .await?
                .ok_or_else(|| ControlError::NotFound(format!("environment {name}")))
        }
        other => other,
    }
}

/// Registers an enrollment token. With `token` given (bootstrap) it is idempotent: the same
/// value registers once. Returns the token row and, when freshly minted, the token itself,
/// which is never retrievable again.
pub async fn create_enrollment_token(
    db: &Db,
    actor: &Actor,
    environment_id: &str,
    token: Option<&str>,
    label: &str,
    now: i64,
) -> Result<(EnrollmentTokenRow, Option<String>)> {
    let (value, minted) = given_or_new_token(token, "vfe_")?;
    let hash = token_hash(&value);
    if let Some(existing) = registered_enrollment_token(db, &hash, environment_id).await? {
        return Ok((existing, None));
    }
    let row = EnrollmentTokenRow {
        id: new_id(),
        environment_id: environment_id.to_string(),
        prefix: shown_prefix(&value, minted),
        label: label.to_string(),
        created_at: now,
        revoked_at: None,
    };
    match insert_enrollment_token(db, actor, &row, &hash, now).await {
        Ok(()) => Ok((row, minted.then_some(value))),
        // Another replica registered the same bootstrap value between our read and our write.
        Err(ControlError::Conflict(e)) if !minted => {
            match registered_enrollment_token(db, &hash, environment_id).await? {
                Some(existing) => Ok((existing, None)),
                None => Err(ControlError::Conflict(e)),
            }
        }
        Err(e) => Err(e),
    }
}

/// The enrollment token registered with this hash, if any; one registered to another
/// environment is a conflict.
async fn registered_enrollment_token(
    db: &Db,
    hash: &str,
    environment_id: &str,
) -> Result<Option<EnrollmentTokenRow>> {
    let existing = sqlx::query_as::<_, EnrollmentTokenRow>(
        "SELECT id, environment_id, prefix, label, created_at, revoked_at
         FROM enrollment_tokens WHERE token_hash = $1",
    )
    .bind(hash)
    .fetch_optional(&db.pool)
    .await?;
    match existing {
        Some(existing) if existing.environment_id != environment_id => Err(ControlError::Conflict(
            "that token is already registered to another environment".into(),
        )),
        other => Ok(other),
    }
}

async fn insert_enrollment_token(
    db: &Db,
    actor: &Actor,
    row: &EnrollmentTokenRow,
    hash: &str,
    now: i64,
) -> Result<()> {
    let mut tx = audit::begin(db).await?;
    sqlx::query(
        "INSERT INTO enrollment_tokens (id, environment_id, token_hash, prefix, label, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&row.id)
    .bind(&row.environment_id)
    .bind(hash)
    .bind(&row.prefix)
    .bind(&row.label)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::EnrollmentTokenCreate,
            target_id: &row.id,
            environment_id: Some(&row.environment_id),
            details: json!({ "prefix": row.prefix, "label": row.label }),
        },
    )
    .await
}

pub async fn list_enrollment_tokens(
    db: &Db,
    environment_id: &str,
) -> Result<Vec<EnrollmentTokenRow>> {
    Ok(sqlx::query_as::<_, EnrollmentTokenRow>(
        "SELECT id, environment_id, prefix, label, created_at, revoked_at
         FROM enrollment_tokens WHERE environment_id = $1 ORDER BY created_at",
    )
    .bind(environment_id)
    .fetch_all(&db.pool)
    .await?)
}

/// The environment a live (unrevoked) enrollment token belongs to.
pub async fn environment_for_enrollment_token(db: &Db, token: &str) -> Result<Environment> {
    let row: Option<(String, String, String, i64)> = sqlx::query_as(
        "SELECT t.token_hash, e.id, e.name, e.created_at FROM enrollment_tokens t
         JOIN environments e ON e.id = t.environment_id
         WHERE t.token_hash = $1 AND t.revoked_at IS NULL",
    )
    .bind(token_hash(token))
    .fetch_optional(&db.pool)
    .await?;
    match row {
        Some((hash, id, name, created_at)) if hash_matches(&hash, token) => Ok(Environment {
            id,
            name,
            created_at,
        }),
        _ => Err(ControlError::Unauthorized),
    }
}

/// Revokes an enrollment token: agents can no longer enroll with it (nodes already enrolled
/// keep their own node tokens). Unknown is 404; already revoked is 409 and changes and
/// records nothing.
pub async fn revoke_enrollment_token(
    db: &Db,
    actor: &Actor,
    token_id: &str,
    now: i64,
) -> Result<()> {
    let row = sqlx::query_as::<_, EnrollmentTokenRow>(
        "SELECT id, environment_id, prefix, label, created_at, revoked_at
         FROM enrollment_tokens WHERE id = $1",
    )
    .bind(token_id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("enrollment token {token_id}")))?;
    if row.revoked_at.is_some() {
        return Err(Revocable::EnrollmentToken.already());
    }
    let mut tx = audit::begin(db).await?;
    revoke::once(&mut tx, Revocable::EnrollmentToken, token_id, now).await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::EnrollmentTokenRevoke,
            target_id: token_id,
            environment_id: Some(&row.environment_id),
            details: json!({ "prefix": row.prefix, "label": row.label }),
        },
    )
    .await?;
    Ok(())
}
