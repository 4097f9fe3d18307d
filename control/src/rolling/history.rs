//! The change history of rolling rollouts, read back from their audit events: who moved
//! which percent from what to what, when, and why. The audit log stays the one record; this
//! turns its rows into typed entries so no page ever shows their raw JSON.

use serde_json::Value;

use crate::audit::{self, AuditAction, AuditRow};
use crate::{Db, Result};

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// The global percent was set (or the rollout created, see [`HistoryEntry::created`]).
    Percent,
    /// An org override was set.
    OrgPercent,
    /// An org override was removed: the org follows the global percent again.
    OrgRemove,
    /// The rollout was deleted: everyone on the old path.
    Delete,
}

impl ChangeKind {
    fn of(action: &str) -> Option<ChangeKind> {
        match AuditAction::parse(action)? {
            AuditAction::RolloutPercent => Some(ChangeKind::Percent),
            AuditAction::RolloutOrgPercent => Some(ChangeKind::OrgPercent),
            AuditAction::RolloutOrgRemove => Some(ChangeKind::OrgRemove),
            AuditAction::RolloutDelete => Some(ChangeKind::Delete),
            _ => None,
        }
    }
}

/// One change of one rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub at: i64,
    pub actor: String,
    pub rollout: String,
    pub kind: ChangeKind,
    /// The org of an override change.
    pub org: Option<String>,
    /// The percent before the change; `None` for an override that did not exist yet.
    pub before: Option<u8>,
    /// The percent after it; `None` for a removed override.
    pub after: Option<u8>,
    /// The change created the rollout (recorded since comments were; older creations read as
    /// a change from 0%).
    pub created: bool,
    pub comment: Option<String>,
}

/// Reads a rollout audit event; `None` for an event of another kind.
pub fn entry_of(row: AuditRow) -> Option<HistoryEntry> {
    let kind = ChangeKind::of(&row.action)?;
    // Details are written by `rolling::apply_noted`; an unreadable one still names who did
    // what and when.
    let details: Value = serde_json::from_str(&row.details).unwrap_or(Value::Null);
    let percent = |side: &str| {
        details[side]["percent"]
            .as_u64()
            .and_then(|p| u8::try_from(p).ok())
    };
    let text = |field: &str| details[field].as_str().map(str::to_owned);
    Some(HistoryEntry {
        at: row.at,
        actor: row.actor,
        rollout: row.target_id,
        kind,
        org: text("org"),
        before: percent("before"),
        after: percent("after"),
        created: details["created"].as_bool().unwrap_or(false),
        comment: text("comment"),
    })
}

/// The newest `limit` changes of every rollout, newest first.
pub async fn history(db: &Db, limit: i64) -> Result<Vec<HistoryEntry>> {
    let rows = audit::for_kind(db, AuditAction::RolloutPercent.target_kind(), limit).await?;
    Ok(rows.into_iter().filter_map(entry_of).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(action: &str, details: &str) -> AuditRow {
        AuditRow {
            seq: 1,
            id: "e1".into(),
            at: 1_000,
            actor: "alice@example.com".into(),
            action: action.into(),
            target_kind: "rollout".into(),
            target_id: "checkout-v2".into(),
            environment_id: None,
            details: details.into(),
            ip: None,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    #[test]
    fn a_percent_change_reads_back_with_its_comment() {
        let e = entry_of(row(
            "rollout.percent",
            r#"{"org":null,"before":{"percent":20,"previousPercent":0,"changedAt":1},
                "after":{"percent":50,"previousPercent":20,"changedAt":2},
                "created":false,"comment":"load test passed"}"#,
        ))
        .unwrap();
        assert_eq!(
            (e.kind, e.before, e.after, e.created, e.org),
            (ChangeKind::Percent, Some(20), Some(50), false, None)
        );
        assert_eq!(e.comment.as_deref(), Some("load test passed"));
        assert_eq!(
            (e.actor.as_str(), e.rollout.as_str(), e.at),
            ("alice@example.com", "checkout-v2", 1_000)
        );
    }

    #[test]
    fn events_written_before_comments_read_without_one() {
        let e = entry_of(row(
            "rollout.org.percent",
            r#"{"org":"org_big","before":null,"after":{"percent":5,"previousPercent":20,"changedAt":2}}"#,
        ))
        .unwrap();
        assert_eq!(
            (e.kind, e.before, e.after, e.created, e.comment),
            (ChangeKind::OrgPercent, None, Some(5), false, None)
        );
        assert_eq!(e.org.as_deref(), Some("org_big"));
    }

    #[test]
    fn unreadable_details_still_say_who_did_what_and_other_events_are_skipped() {
        let e = entry_of(row("rollout.delete", "not json")).unwrap();
        assert_eq!(
            (e.kind, e.before, e.after),
            (ChangeKind::Delete, None, None)
        );
        assert!(entry_of(row("pipeline.deploy", "{}")).is_none());
    }
}
