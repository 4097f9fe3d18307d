//! Server functions of the edge-config admin page (rolling rollouts). The same changes are
//! available as REST routes under `/api/admin/rollouts` for automation.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{EdgeAdminView, RollingView};

#[cfg(feature = "ssr")]
fn view_of(s: vf_control::rolling::StoredRollout) -> RollingView {
    RollingView {
        name: s.rollout.name.clone(),
        global: s.rollout.global,
        orgs: s.rollout.orgs.clone().into_iter().collect(),
        retired_at: s.rollout.retired_at,
        row_version: s.row_version,
        updated_at: s.updated_at,
    }
}

#[cfg(feature = "ssr")]
fn action_of(kind: vf_control::rolling::ChangeKind) -> &'static str {
    use vf_control::audit::AuditAction;
    use vf_control::rolling::ChangeKind;
    match kind {
        ChangeKind::Percent => AuditAction::RolloutPercent,
        ChangeKind::OrgPercent => AuditAction::RolloutOrgPercent,
        ChangeKind::OrgRemove => AuditAction::RolloutOrgRemove,
        ChangeKind::Delete => AuditAction::RolloutDelete,
    }
    .as_str()
}

/// The rolling rollouts, the published edge document's version and the newest 50 changes.
#[server(endpoint = "admin.edge.get", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn edge_admin() -> Result<EdgeAdminView, ServerFnError> {
    use super::server::*;
    use crate::types::RollingChange;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Global).await?;
    let doc = vf_control::rolling::edge_config(&ctl.db)
        .await
        .map_err(fail)?;
    let rollouts = vf_control::rolling::list(&ctl.db).await.map_err(fail)?;
    let history = vf_control::rolling::history(&ctl.db, 50)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|h| RollingChange {
            at: h.at,
            actor: h.actor,
            action: action_of(h.kind).to_owned(),
            rollout: h.rollout,
            org: h.org,
            before: h.before,
            after: h.after,
            created: h.created,
            comment: h.comment,
        })
        .collect();
    Ok(EdgeAdminView {
        rollouts: rollouts.into_iter().map(view_of).collect(),
        version: doc.version,
        generated_at: doc.generated_at,
        history,
        now: ctl.now(),
    })
}

/// Sets a rollout's global percent (creating it), or an org override's when `org` is given.
/// `row_version` is the version the admin saw; required for an existing rollout. `comment`
/// (at most 500 characters) says why, in the history.
#[server(endpoint = "admin.rollout.set", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn set_rollout_percent(
    name: String,
    #[server(default)] org: Option<String>,
    percent: i64,
    #[server(default)] row_version: Option<i64>,
    #[server(default)] comment: Option<String>,
) -> Result<RollingView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::rolling::{apply_noted, parse_percent, Change, Comment};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    let p = parse_percent(&serde_json::json!(percent)).map_err(fail)?;
    let comment = Comment::parse(comment).map_err(fail)?;
    let change = match org.filter(|o| !o.trim().is_empty()) {
        Some(o) => Change::SetOrg(o.trim().to_string(), p),
        None => Change::SetGlobal(p),
    };
    let s = apply_noted(
        &ctl.db,
        &g.actor,
        name.trim(),
        change,
        row_version,
        comment.as_ref(),
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(view_of(s))
}

/// Removes an org override: the org's customers route by the global percent again.
#[server(endpoint = "admin.rollout.org.remove", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn remove_org_override(
    name: String,
    org: String,
    row_version: i64,
    #[server(default)] comment: Option<String>,
) -> Result<RollingView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::rolling::{apply_noted, Change, Comment};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    let comment = Comment::parse(comment).map_err(fail)?;
    let s = apply_noted(
        &ctl.db,
        &g.actor,
        &name,
        Change::RemoveOrg(org),
        Some(row_version),
        comment.as_ref(),
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(view_of(s))
}

/// Deletes a rollout (every customer back on the old path). `confirm_name` must be the
/// rollout's name, exactly, so no caller deletes one by accident.
#[server(endpoint = "admin.rollout.delete", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn delete_rollout(
    name: String,
    row_version: i64,
    // Defaulted so a missing one is refused naming the field, like a wrong one.
    #[server(default)] confirm_name: String,
) -> Result<RollingView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::rolling::{apply, confirm_delete, Change};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    confirm_delete(&name, &confirm_name).map_err(fail)?;
    let s = apply(
        &ctl.db,
        &g.actor,
        &name,
        Change::Delete,
        Some(row_version),
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(view_of(s))
}
