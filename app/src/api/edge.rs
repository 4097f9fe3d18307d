//! Server functions of the edge-config admin page (rolling rollouts). The same changes are
//! available as REST routes under `/api/admin/rollouts` for automation.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;

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

#[server(endpoint = "admin.edge.get", input = Json)]
pub async fn edge_admin() -> Result<EdgeAdminView, ServerFnError> {
    use super::server::*;
    use crate::types::RollingChange;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Global).await?;
    let doc = vf_control::rolling::edge_config(&ctl.db)
        .await
        .map_err(fail)?;
    let rollouts = vf_control::rolling::list(&ctl.db).await.map_err(fail)?;
    let history = vf_control::audit::for_kind(&ctl.db, "rollout", 50)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|a| RollingChange {
            at: a.at,
            actor: a.actor,
            action: a.action,
            rollout: a.target_id,
            details: a.details,
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
/// `row_version` is the version the admin saw; required for an existing rollout.
#[server(endpoint = "admin.rollout.set", input = Json)]
pub async fn set_rollout_percent(
    name: String,
    #[server(default)] org: Option<String>,
    percent: i64,
    #[server(default)] row_version: Option<i64>,
) -> Result<RollingView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::rolling::{apply, parse_percent, Change};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    let p = parse_percent(&serde_json::json!(percent)).map_err(fail)?;
    let change = match org.filter(|o| !o.trim().is_empty()) {
        Some(o) => Change::SetOrg(o.trim().to_string(), p),
        None => Change::SetGlobal(p),
    };
    let s = apply(
        &ctl.db,
        &g.actor,
        name.trim(),
        change,
        row_version,
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(view_of(s))
}

#[server(endpoint = "admin.rollout.org.remove", input = Json)]
pub async fn remove_org_override(
    name: String,
    org: String,
    row_version: i64,
) -> Result<RollingView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::rolling::{apply, Change};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    let s = apply(
        &ctl.db,
        &g.actor,
        &name,
        Change::RemoveOrg(org),
        Some(row_version),
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(view_of(s))
}

#[server(endpoint = "admin.rollout.delete", input = Json)]
pub async fn delete_rollout(name: String, row_version: i64) -> Result<RollingView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::rolling::{apply, Change};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
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
