//! Rolling rollouts: customer-keyed percentages with per-org overrides (SPEC section 6).
//! The rules (buckets, resolution, flips, staleness) are `vf-rolling`; this module stores
//! each rollout as its document, changes it only through vf-rolling's operations, and saves
//! with compare-and-set so two admins never silently overwrite each other.

use serde_json::json;
use vf_rolling::{EdgeConfig, Percent, Rollout, RolloutEntry};

use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::{ControlError, Db, Result};

pub mod history;

pub use history::{history, ChangeKind, HistoryEntry};

/// A stored rollout with its row version (the admin API's ETag).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRollout {
    pub rollout: Rollout,
    pub row_version: i64,
    pub updated_at: i64,
}

/// Rollout names and org ids: 1-128 characters of letters, digits, `.`, `_`, `-`, `:`.
pub fn parse_id(field: &str, id: &str) -> Result<String> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'));
    if ok {
        Ok(id.to_string())
    } else {
        Err(ControlError::invalid(
            field,
            "1-128 characters of letters, digits, '.', '_', '-' or ':'",
        ))
    }
}

/// A percent from JSON: a whole number 0..=100.
pub fn parse_percent(value: &serde_json::Value) -> Result<Percent> {
    let n = value
        .as_i64()
        .filter(|_| value.is_i64() || value.is_u64())
        .ok_or_else(|| ControlError::invalid("percent", "must be a whole number from 0 to 100"))?;
    Percent::try_from(n)
        .map_err(|_| ControlError::invalid("percent", "must be a whole number from 0 to 100"))
}

/// The most characters an operator's comment on a change may have.
pub const MAX_COMMENT_CHARS: usize = 500;

/// Why an operator made a routing change, kept with the change in its audit event and shown
/// in the history. Trimmed; a blank comment is no comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment(String);

impl Comment {
    /// Refuses a comment over [`MAX_COMMENT_CHARS`] characters, naming the field `comment`.
    pub fn parse(comment: Option<String>) -> Result<Option<Comment>> {
        let Some(text) = comment
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty())
        else {
            return Ok(None);
        };
        let chars = text.chars().count();
        if chars > MAX_COMMENT_CHARS {
            return Err(ControlError::invalid(
                "comment",
                format!("at most {MAX_COMMENT_CHARS} characters (this one has {chars})"),
            ));
        }
        Ok(Some(Comment(text)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A delete must name the rollout it deletes, exactly: a caller deleting the wrong rollout
/// (a stale tab, a copied request) is refused instead of turning its customers off.
pub fn confirm_delete(name: &str, confirm_name: &str) -> Result<()> {
    if name == confirm_name {
        Ok(())
    } else {
        Err(ControlError::invalid(
            "confirm_name",
            format!("must be the rollout's name, {name}, exactly"),
        ))
    }
}

fn row_to_stored(
    name: String,
    doc: String,
    row_version: i64,
    updated_at: i64,
) -> Result<StoredRollout> {
    let mut rollout: Rollout = serde_json::from_str(&doc)?;
    rollout.name = name;
    Ok(StoredRollout {
        rollout,
        row_version,
        updated_at,
    })
}

pub async fn list(db: &Db) -> Result<Vec<StoredRollout>> {
    list_with(&db.pool).await
}

async fn list_with(conn: impl sqlx::AnyExecutor<'_>) -> Result<Vec<StoredRollout>> {
    let rows: Vec<(String, String, i64, i64)> =
        sqlx::query_as("SELECT name, doc, row_version, updated_at FROM rollouts ORDER BY name")
            .fetch_all(conn)
            .await?;
    rows.into_iter()
        .map(|(n, d, v, u)| row_to_stored(n, d, v, u))
        .collect()
}

pub async fn get(db: &Db, name: &str) -> Result<Option<StoredRollout>> {
    let row: Option<(String, String, i64, i64)> =
        sqlx::query_as("SELECT name, doc, row_version, updated_at FROM rollouts WHERE name = $1")
            .bind(name)
            .fetch_optional(&db.pool)
            .await?;
    row.map(|(n, d, v, u)| row_to_stored(n, d, v, u))
        .transpose()
}

/// The published document: every rollout (retired ones stay, at 0 %, so caches see that
/// their customers moved) and its version.
pub async fn edge_config(db: &Db) -> Result<EdgeConfig> {
    // Version and rollouts from one snapshot, so one ETag always means one body.
    let mut tx = db.snapshot().await?;
    let version: i64 = sqlx::query_scalar("SELECT version FROM edge_config_state WHERE id = 1")
        .fetch_one(&mut *tx)
        .await?;
    let rollouts = list_with(&mut *tx).await?;
    tx.commit().await?;
    let mut config = EdgeConfig::empty();
    config.version = version;
    // The time of the last change, so one version is always the same bytes (strong ETag).
    config.generated_at = rollouts.iter().map(|r| r.updated_at).max().unwrap_or(0);
    for stored in rollouts {
        config
            .rollouts
            .insert(stored.rollout.name.clone(), stored.rollout);
    }
    Ok(config)
}

/// One admin change to a rollout.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    SetGlobal(Percent),
    SetOrg(String, Percent),
    RemoveOrg(String),
    Delete,
}

impl Change {
    fn action(&self) -> AuditAction {
        match self {
            Change::SetGlobal(_) => AuditAction::RolloutPercent,
            Change::SetOrg(..) => AuditAction::RolloutOrgPercent,
            Change::RemoveOrg(_) => AuditAction::RolloutOrgRemove,
            Change::Delete => AuditAction::RolloutDelete,
        }
    }
}

fn entry_json(e: Option<&RolloutEntry>) -> serde_json::Value {
    e.map(|e| json!({"percent": e.percent, "previousPercent": e.previous_percent, "changedAt": e.changed_at}))
        .unwrap_or(serde_json::Value::Null)
}

/// Applies `change` to rollout `name`. `if_match` is the row version the admin saw: a
/// different current version is a conflict (someone else changed it). Creating a rollout
/// (setting the global percent of a new name) needs no `if_match`.
pub async fn apply(
    db: &Db,
    actor: &Actor,
    name: &str,
    change: Change,
    if_match: Option<i64>,
    now: i64,
) -> Result<StoredRollout> {
    apply_noted(db, actor, name, change, if_match, None, now).await
}

/// [`apply`] with the operator's comment, kept in the change's audit event (`comment`) so the
/// history says why routing moved.
pub async fn apply_noted(
    db: &Db,
    actor: &Actor,
    name: &str,
    change: Change,
    if_match: Option<i64>,
    comment: Option<&Comment>,
    now: i64,
) -> Result<StoredRollout> {
    let name = parse_id("rollout", name)?;
    let current = get(db, &name).await?;
    if let (Some(stored), Some(expected)) = (&current, if_match) {
        if stored.row_version != expected {
            return Err(ControlError::PreconditionFailed(format!(
                "rollout {name} changed meanwhile (now version {}, you saw {expected}); reload and try again",
                stored.row_version
            )));
        }
    }
    if current.is_some() && if_match.is_none() {
        return Err(ControlError::PreconditionRequired(format!(
            "rollout {name} exists: send the version you saw (If-Match), so no change is overwritten unseen"
        )));
    }
    let mut rollout = match (&current, &change) {
        (Some(s), _) => s.rollout.clone(),
        (None, Change::SetGlobal(_)) => Rollout::new(name.clone()),
        (None, _) => return Err(ControlError::NotFound(format!("rollout {name}"))),
    };
    let before = (entry_json(Some(&rollout.global)), rollout.orgs.clone());
    let (org, before_entry) = match &change {
        Change::SetOrg(org, _) | Change::RemoveOrg(org) => {
            let org = parse_id("org", org)?;
            let e = entry_json(rollout.orgs.get(&org));
            (Some(org), e)
        }
        _ => (None, before.0.clone()),
    };
    match &change {
        Change::SetGlobal(p) => rollout.set_global(*p, now),
        Change::SetOrg(_, p) => rollout.set_org(org.as_deref().unwrap_or_default(), *p, now),
        Change::RemoveOrg(_) => {
            if rollout
                .remove_org(org.as_deref().unwrap_or_default(), now)
                .is_none()
            {
                return Err(ControlError::NotFound(format!(
                    "org override {} of rollout {name}",
                    org.unwrap_or_default()
                )));
            }
        }
        Change::Delete => rollout.retire(now),
    }
    let after_entry = match &org {
        Some(o) => entry_json(rollout.orgs.get(o)),
        None => entry_json(Some(&rollout.global)),
    };
    let doc = serde_json::to_string(&rollout)?;
    let mut tx = audit::begin(db).await?;
    match &current {
        None => {
            sqlx::query(
                "INSERT INTO rollouts (name, doc, row_version, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)",
            )
            .bind(&name)
            .bind(&doc)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                if e.as_database_error().is_some_and(|d| d.is_unique_violation()) {
                    ControlError::Conflict(format!("rollout {name} was created meanwhile; reload and try again"))
                } else {
                    e.into()
                }
            })?;
        }
        Some(stored) => {
            let done = sqlx::query(
                "UPDATE rollouts SET doc = $1, row_version = row_version + 1, updated_at = $2
                 WHERE name = $3 AND row_version = $4",
            )
            .bind(&doc)
            .bind(now)
            .bind(&name)
            .bind(stored.row_version)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() != 1 {
                return Err(ControlError::Conflict(format!(
                    "rollout {name} changed meanwhile; reload and try again"
                )));
            }
        }
    }
    sqlx::query("UPDATE edge_config_state SET version = version + 1 WHERE id = 1")
        .execute(&mut *tx)
        .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: change.action(),
            target_id: &name,
            environment_id: None,
            details: json!({
                "org": org,
                "before": before_entry,
                "after": after_entry,
                "created": current.is_none(),
                "comment": comment.map(Comment::as_str),
            }),
        },
    )
    .await?;
    get(db, &name)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("rollout {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percents_must_be_whole_numbers_from_0_to_100() {
        assert_eq!(parse_percent(&json!(35)).unwrap().get(), 35);
        assert!(parse_percent(&json!(101)).is_err());
        assert!(parse_percent(&json!(-1)).is_err());
        assert!(parse_percent(&json!(12.5)).is_err());
        assert!(parse_percent(&json!("50")).is_err());
    }

    #[test]
    fn a_comment_is_trimmed_blank_is_none_and_over_500_characters_is_refused() {
        assert_eq!(Comment::parse(None).unwrap(), None);
        assert_eq!(Comment::parse(Some("  ".into())).unwrap(), None);
        let c = Comment::parse(Some(" ramp after the load test ".into())).unwrap();
        assert_eq!(
            c.as_ref().map(Comment::as_str),
            Some("ramp after the load test")
        );
        // Characters, not bytes: 500 accented letters are fine.
        assert!(Comment::parse(Some("é".repeat(500))).unwrap().is_some());
        let err = Comment::parse(Some("x".repeat(501))).unwrap_err();
        assert!(err.to_string().starts_with("comment:"), "{err}");
    }

    #[test]
    fn a_delete_names_its_rollout_exactly() {
        assert!(confirm_delete("v2-cache", "v2-cache").is_ok());
        for wrong in ["", "v2", "V2-CACHE", " v2-cache"] {
            let err = confirm_delete("v2-cache", wrong).unwrap_err();
            assert!(err.to_string().starts_with("confirm_name:"), "{err}");
        }
    }

    #[test]
    fn ids_are_short_and_safe() {
        assert!(parse_id("rollout", "v2-cache").is_ok());
        assert!(parse_id("org", "org_123:eu").is_ok());
        assert!(parse_id("rollout", "").is_err());
        assert!(parse_id("rollout", "a/b").is_err());
        assert!(parse_id("rollout", &"x".repeat(129)).is_err());
    }
}
