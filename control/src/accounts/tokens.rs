//! API tokens for automation: scoped to one environment (or `*`) and one role, sent as
//! `Authorization: Bearer <token>` to every server function and admin route. The special
//! role `edge-config` makes a read-only token for `GET /api/edge-config` and nothing else.
//! Shown once at creation; stored as sha256; listed by prefix only.

use serde::Serialize;
use serde_json::json;

use super::Authenticated;
use crate::access::{Grant, Identity, Principal, Role, ALL_ENVIRONMENTS};
use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::ids::{given_or_new_token, hash_matches, new_id, shown_prefix, token_hash};
use crate::revoke::{self, Revocable};
use crate::{ControlError, Db, Result};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TokenRole {
    Role(Role),
    /// Reads the edge config only.
    EdgeConfig,
}

impl TokenRole {
    pub fn parse(field: &str, s: &str) -> Result<TokenRole> {
        match s.trim() {
            "edge-config" => Ok(TokenRole::EdgeConfig),
            other => crate::access::parse_role(field, other)
                .map(TokenRole::Role)
                .map_err(|_| {
                    ControlError::invalid(
                        field,
                        format!("must be viewer, editor, admin or edge-config, got {other:?}"),
                    )
                }),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TokenRole::Role(r) => r.as_str(),
            TokenRole::EdgeConfig => "edge-config",
        }
    }
}

/// A stored API token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ApiTokenRow {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub environment_id: String,
    pub role: String,
    pub created_by: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

const COLUMNS: &str =
    "id, name, prefix, environment_id, role, created_by, created_at, last_used_at, revoked_at";

/// Creates a token. With `value` given (the bootstrap variables) it is idempotent: the same
/// value registers once. Returns the row and, when freshly minted, the token itself.
pub async fn create_api_token(
    db: &Db,
    actor: &Actor,
    name: &str,
    environment_id: &str,
    role: TokenRole,
    value: Option<&str>,
    now: i64,
) -> Result<(ApiTokenRow, Option<String>)> {
    let name = name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(ControlError::invalid("name", "must be 1 to 100 characters"));
    }
    if role == TokenRole::EdgeConfig && environment_id != ALL_ENVIRONMENTS {
        return Err(ControlError::invalid(
            "environment_id",
            "edge-config tokens are not per environment; use \"*\"",
        ));
    }
    super::validate_grants(
        db,
        &[Grant {
            environment_id: environment_id.to_string(),
            role: Role::Viewer,
        }],
    )
    .await
    .map_err(|_| {
        ControlError::invalid(
            "environment_id",
            format!("no environment with id {environment_id:?} (use \"*\" for all)"),
        )
    })?;
    let prefix = match role {
        TokenRole::EdgeConfig => "vfc_",
        TokenRole::Role(_) => "vfa_",
    };
    let (value, minted) = given_or_new_token(value, prefix)?;
    let same_name: Vec<(String, String)> =
        sqlx::query_as("SELECT id, created_by FROM api_tokens WHERE name = $1")
            .bind(name)
            .fetch_all(&db.pool)
            .await?;
    let hash = token_hash(&value);
    if let Some(existing) = registered(db, &hash, role, environment_id).await? {
        return Ok((existing, None));
    }
    // Calls are recorded as `token:<name>`, and "your own release" compares that name: two
    // tokens with one name would be one actor. A bootstrap variable with a new value is a
    // rotation: it replaces the tokens of its name it registered before.
    let rotation = !minted && same_name.iter().all(|(_, by)| *by == actor.name);
    if !same_name.is_empty() && !rotation {
        return Err(ControlError::Conflict(format!(
            "an API token named {name:?} exists (revoked ones too); choose another name"
        )));
    }
    let row = ApiTokenRow {
        id: new_id(),
        name: name.to_string(),
        prefix: shown_prefix(&value, minted),
        environment_id: environment_id.to_string(),
        role: role.as_str().to_string(),
        created_by: actor.name.clone(),
        created_at: now,
        last_used_at: None,
        revoked_at: None,
    };
    match insert_api_token(db, actor, &row, &hash, now).await {
        Ok(()) => Ok((row, minted.then_some(value))),
        // Another replica registered the same bootstrap value between our read and our write.
        Err(ControlError::Conflict(e)) if !minted => {
            match registered(db, &hash, role, environment_id).await? {
                Some(existing) => Ok((existing, None)),
                None => Err(ControlError::Conflict(e)),
            }
        }
        Err(e) => Err(e),
    }
}

/// The token registered with this hash, if any; one registered with another role or
/// environment is a conflict.
async fn registered(
    db: &Db,
    hash: &str,
    role: TokenRole,
    environment_id: &str,
) -> Result<Option<ApiTokenRow>> {
    let existing = sqlx::query_as::<_, ApiTokenRow>(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM api_tokens WHERE token_hash = $1"
    )))
    .bind(hash)
    .fetch_optional(&db.pool)
    .await?;
    match existing {
        Some(existing)
            if existing.role != role.as_str() || existing.environment_id != environment_id =>
        {
            Err(ControlError::Conflict(
                "that token is already registered with another role or environment".into(),
            ))
        }
        other => Ok(other),
    }
}

/// Inserts the token (revoking older tokens of its name: a rotation) and audits it.
async fn insert_api_token(
    db: &Db,
    actor: &Actor,
    row: &ApiTokenRow,
    hash: &str,
    now: i64,
) -> Result<()> {
    let (name, environment_id) = (row.name.as_str(), row.environment_id.as_str());
    let mut tx = audit::begin(db).await?;
    let replaced =
        sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL")
            .bind(now)
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    sqlx::query(
        "INSERT INTO api_tokens (id, name, prefix, token_hash, environment_id, role, created_by, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&row.id)
    .bind(&row.name)
    .bind(&row.prefix)
    .bind(hash)
    .bind(&row.environment_id)
    .bind(&row.role)
    .bind(&row.created_by)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::ApiTokenCreate,
            target_id: &row.id,
            environment_id: (environment_id != ALL_ENVIRONMENTS).then_some(environment_id),
            details: json!({
                "name": row.name,
                "prefix": row.prefix,
                "role": row.role,
                "environment_id": environment_id,
                "replaced": replaced,
            }),
        },
    )
    .await
}

/// Every API token, newest first.
pub async fn list_api_tokens(db: &Db) -> Result<Vec<ApiTokenRow>> {
    Ok(
        sqlx::query_as::<_, ApiTokenRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM api_tokens ORDER BY created_at DESC, id DESC"
        )))
        .fetch_all(&db.pool)
        .await?,
    )
}

/// Revokes a token: its next request is 401. Unknown is 404; already revoked is 409 and
/// changes and records nothing (the first revocation's time stays).
pub async fn revoke_api_token(db: &Db, actor: &Actor, id: &str, now: i64) -> Result<ApiTokenRow> {
    let row = sqlx::query_as::<_, ApiTokenRow>(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM api_tokens WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("API token {id}")))?;
    if row.revoked_at.is_some() {
        return Err(Revocable::ApiToken.already());
    }
    let mut tx = audit::begin(db).await?;
    revoke::once(&mut tx, Revocable::ApiToken, id, now).await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::ApiTokenRevoke,
            target_id: id,
            environment_id: (row.environment_id != ALL_ENVIRONMENTS).then_some(&row.environment_id),
            details: json!({ "name": row.name, "prefix": row.prefix, "role": row.role }),
        },
    )
    .await?;
    Ok(ApiTokenRow {
        revoked_at: Some(now),
        ..row
    })
}

/// Whether `grants` still cover a token of `role` in `environment_id`: a token never outranks
/// the user who minted it (edge-config tokens need admin of every environment, as minting
/// one does).
pub fn covered_by(grants: &[Grant], environment_id: &str, role: &str) -> bool {
    match TokenRole::parse("role", role) {
        Ok(TokenRole::EdgeConfig) => {
            crate::access::role_in(grants, ALL_ENVIRONMENTS) == Some(Role::Admin)
        }
        Ok(TokenRole::Role(r)) => crate::access::role_in(grants, environment_id) >= Some(r),
        Err(_) => false,
    }
}

/// Revokes, inside the caller's transaction, the live tokens `creator` minted that `grants`
/// no longer cover (all of them with `None`: the creator was disabled). Returns their ids.
pub(crate) async fn revoke_beyond(
    conn: &mut sqlx::AnyConnection,
    creator: &str,
    grants: Option<&[Grant]>,
    now: i64,
) -> Result<Vec<String>> {
    let live: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT id, environment_id, role FROM api_tokens WHERE created_by = $1 AND revoked_at IS NULL",
    )
    .bind(creator)
    .fetch_all(&mut *conn)
    .await?;
    let mut revoked = Vec::new();
    for (id, environment_id, role) in live {
        if grants.is_some_and(|g| covered_by(g, &environment_id, &role)) {
            continue;
        }
        if revoke::stamp(conn, Revocable::ApiToken, &id, now).await? {
            revoked.push(id);
        }
    }
    Ok(revoked)
}

/// How often `last_used_at` is written for a busy token.
const LAST_USED_RESOLUTION_MS: i64 = 60_000;

/// What a bearer token proves: a principal with the token's one grant, the edge-config
/// reader, or nothing (unknown or revoked).
pub(crate) async fn resolve(
    db: &Db,
    token: &str,
    ip: Option<&str>,
    now: i64,
) -> Result<Authenticated> {
    type Row = (
        String,
        String,
        String,
        String,
        String,
        Option<i64>,
        Option<i64>,
    );
    let row: Option<Row> = sqlx::query_as(
        "SELECT token_hash, id, name, environment_id, role, last_used_at, revoked_at
         FROM api_tokens WHERE token_hash = $1",
    )
    .bind(token_hash(token))
    .fetch_optional(&db.pool)
    .await?;
    let Some((hash, id, name, environment_id, role, last_used_at, revoked_at)) = row else {
        return Ok(Authenticated::default());
    };
    if !hash_matches(&hash, token) || revoked_at.is_some() {
        return Ok(Authenticated::default());
    }
    if last_used_at.is_none_or(|t| now - t >= LAST_USED_RESOLUTION_MS) {
        sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2")
            .bind(now)
            .bind(&id)
            .execute(&db.pool)
            .await?;
    }
    match TokenRole::parse("role", &role)? {
        TokenRole::EdgeConfig => Ok(Authenticated {
            principal: None,
            edge_reader: true,
        }),
        TokenRole::Role(role) => Ok(Authenticated {
            principal: Some(Principal {
                identity: Identity::ApiToken { id, name },
                grants: vec![Grant {
                    environment_id,
                    role,
                }],
                ip: ip.map(str::to_string),
            }),
            edge_reader: false,
        }),
    }
}
