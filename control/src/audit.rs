//! The audit log: who did what to which object, when, with what evidence.

use serde_json::Value;
use sqlx::AnyConnection;

use crate::ids::new_id;
use crate::Result;

/// One audit entry to append.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    pub actor: &'a str,
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    pub environment_id: Option<&'a str>,
    pub details: Value,
}

/// Appends an entry inside the caller's transaction, so the action and its record commit
/// together or not at all.
pub async fn record(conn: &mut AnyConnection, now: i64, entry: AuditEntry<'_>) -> Result<()> {
    sqlx::query(
        "INSERT INTO audit_events (id, at, actor, action, target_kind, target_id, environment_id, details)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(new_id())
    .bind(now)
    .bind(entry.actor)
    .bind(entry.action)
    .bind(entry.target_kind)
    .bind(entry.target_id)
    .bind(entry.environment_id)
    .bind(entry.details.to_string())
    .execute(conn)
    .await?;
    Ok(())
}

/// A stored audit event.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AuditRow {
    pub id: String,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub environment_id: Option<String>,
    pub details: String,
}

/// The newest events for one target (pipeline, release...), newest first.
pub async fn for_target(
    db: &crate::Db,
    target_kind: &str,
    target_id: &str,
    limit: i64,
) -> Result<Vec<AuditRow>> {
    Ok(sqlx::query_as::<_, AuditRow>(
        "SELECT id, at, actor, action, target_kind, target_id, environment_id, details
         FROM audit_events WHERE target_kind = $1 AND target_id = $2 ORDER BY seq DESC LIMIT $3",
    )
    .bind(target_kind)
    .bind(target_id)
    .bind(limit)
    .fetch_all(&db.pool)
    .await?)
}

/// The newest events about any object of one kind (e.g. every rollout), newest first.
pub async fn for_kind(db: &crate::Db, target_kind: &str, limit: i64) -> Result<Vec<AuditRow>> {
    Ok(sqlx::query_as::<_, AuditRow>(
        "SELECT id, at, actor, action, target_kind, target_id, environment_id, details
         FROM audit_events WHERE target_kind = $1 ORDER BY seq DESC LIMIT $2",
    )
    .bind(target_kind)
    .bind(limit)
    .fetch_all(&db.pool)
    .await?)
}
