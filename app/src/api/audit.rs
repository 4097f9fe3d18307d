//! Server functions of the audit log: filtered listing and chain verification.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which events to list; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct AuditQuery {
    pub actor: Option<String>,
    /// Matches actions starting with this (`release.`).
    pub action_prefix: Option<String>,
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    /// Inclusive, ms since the epoch.
    pub since: Option<i64>,
    /// Exclusive, ms since the epoch.
    pub until: Option<i64>,
    /// At most 500; 100 when absent.
    pub limit: Option<i64>,
}

/// One audit event as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditEventView {
    pub seq: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub environment_id: Option<String>,
    /// The stored JSON text.
    pub details: String,
    pub ip: Option<String>,
    /// What people call the target ("edge-logs", "v3 of edge-logs", an email); `None` when
    /// it is gone.
    #[serde(default)]
    pub target_name: Option<String>,
    /// The environment's name.
    #[serde(default)]
    pub environment: Option<String>,
}

/// The outcome of checking the hash chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditVerifyView {
    pub events: i64,
    /// The first row that does not verify and why.
    pub broken_seq: Option<i64>,
    pub reason: Option<String>,
}

/// Events matching the query, newest first.
#[server(endpoint = "audit.list", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_audit(query: AuditQuery) -> Result<Vec<AuditEventView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Global).await?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=vf_control::audit::MAX_LIST).contains(&limit) {
        return Err(fail(vf_control::ControlError::invalid(
            "limit",
            "must be between 1 and 500",
        )));
    }
    let filter = vf_control::audit::AuditFilter {
        actor: query.actor,
        action_prefix: query.action_prefix,
        target_kind: query.target_kind,
        target_id: query.target_id,
        since: query.since,
        until: query.until,
    };
    let rows = vf_control::audit::list(&ctl.db, &filter, limit)
        .await
        .map_err(fail)?;
    let names = vf_control::audit::target_names(&ctl.db, &rows)
        .await
        .map_err(fail)?;
    let name = |kind: &str, id: &str| names.get(&(kind.to_owned(), id.to_owned())).cloned();
    Ok(rows
        .into_iter()
        .map(|r| AuditEventView {
            target_name: name(&r.target_kind, &r.target_id),
            environment: r
                .environment_id
                .as_deref()
                .and_then(|e| name("environment", e)),
            seq: r.seq,
            at: r.at,
            actor: r.actor,
            action: r.action,
            target_kind: r.target_kind,
            target_id: r.target_id,
            environment_id: r.environment_id,
            details: r.details,
            ip: r.ip,
        })
        .collect())
}

/// Checks the whole chain (the same check as the `vf-audit-verify` command).
#[server(endpoint = "audit.verify", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn verify_audit() -> Result<AuditVerifyView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Global).await?;
    let report = vf_control::audit::verify(&ctl.db).await.map_err(fail)?;
    Ok(AuditVerifyView {
        events: i64::try_from(report.events).unwrap_or(i64::MAX),
        broken_seq: report.broken.as_ref().map(|b| b.seq),
        reason: report.broken.map(|b| b.reason),
    })
}
