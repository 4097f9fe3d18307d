//! Server functions of the fleet: environments, enrollment tokens, nodes, node groups.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{EnvironmentView, FleetView, GroupView, Labels, NodeDetailView, TokenView};
#[cfg(feature = "ssr")]
use crate::types::{NodePipelineView, NodeView};

/// The environments the caller holds a role in.
#[server(endpoint = "environment.list", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_environments() -> Result<Vec<EnvironmentView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Any).await?;
    let me = principal();
    let envs = vf_control::fleet::list_environments(&ctl.db)
        .await
        .map_err(fail)?;
    // Only the environments the caller holds a role in.
    Ok(envs
        .into_iter()
        .filter(|e| me.as_ref().is_some_and(|p| p.role_in(&e.id).is_some()))
        .map(|e| EnvironmentView {
            id: e.id,
            name: e.name,
        })
        .collect())
}

/// Creates an environment; 409 when the name is taken.
#[server(endpoint = "environment.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn create_environment(name: String) -> Result<EnvironmentView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    let e = vf_control::fleet::create_environment(&ctl.db, &g.actor, &name, ctl.now())
        .await
        .map_err(fail)?;
    Ok(EnvironmentView {
        id: e.id,
        name: e.name,
    })
}

/// The environment's enrollment tokens (never the token itself).
#[server(endpoint = "environment.tokens", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_enrollment_tokens(
    environment_id: String,
) -> Result<Vec<TokenView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Admin, Target::Environment(&environment_id)).await?;
    let rows = vf_control::fleet::list_enrollment_tokens(&ctl.db, &environment_id)
        .await
        .map_err(fail)?;
    Ok(rows
        .into_iter()
        .map(|t| TokenView {
            id: t.id,
            prefix: t.prefix,
            label: t.label,
            created_at: t.created_at,
            revoked: t.revoked_at.is_some(),
        })
        .collect())
}

/// Mints an enrollment token; the returned value is shown once and never again.
#[server(endpoint = "environment.token.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn create_enrollment_token(
    environment_id: String,
    label: String,
) -> Result<String, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Environment(&environment_id)).await?;
    vf_control::fleet::get_environment(&ctl.db, &environment_id)
        .await
        .map_err(fail)?;
    let (_, token) = vf_control::fleet::create_enrollment_token(
        &ctl.db,
        &g.actor,
        &environment_id,
        None,
        label.trim(),
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    token.ok_or_else(|| ServerFnError::new("token was not minted"))
}

/// One page of the environment's nodes, by name: `name` (part of it, any case), `label`
/// (`key=value` or `key`) and `status` filter; `offset` and `limit` (default 50, at most 500)
/// cut the page. The counts cover every node.
#[server(endpoint = "fleet.nodes", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn fleet_nodes(
    environment_id: String,
    #[server(default)] name: Option<String>,
    #[server(default)] label: Option<String>,
    #[server(default)] status: Option<vf_rules::NodeStatus>,
    #[server(default)] offset: Option<i64>,
    #[server(default)] limit: Option<i64>,
) -> Result<FleetView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::fleet::{NodeFilter, PageRequest};
    let (ctl, _) = authorize(Role::Viewer, Target::Environment(&environment_id)).await?;
    let filter = NodeFilter::parse(name.as_deref(), label.as_deref(), status).map_err(fail)?;
    let page = PageRequest::parse(offset, limit).map_err(fail)?;
    let now = ctl.now();
    let names: std::collections::HashMap<String, String> =
        vf_control::pipelines::list_pipelines(&ctl.db, &environment_id)
            .await
            .map_err(fail)?
            .into_iter()
            .map(|p| (p.id, p.name))
            .collect();
    let found = vf_control::fleet::fleet_page(&ctl.db, &environment_id, now, &filter, page)
        .await
        .map_err(fail)?;
    let nodes = found.rows;
    Ok(FleetView {
        now,
        total: found.total as i64,
        by_status: found
            .by_status
            .into_iter()
            .map(|(s, n)| (s, n as i64))
            .collect(),
        matched: found.matched as i64,
        offset: page.offset as i64,
        limit: page.limit as i64,
        nodes: nodes
            .into_iter()
            .map(|n| NodeView {
                id: n.node.id.clone(),
                name: n.node.name.clone(),
                kind: n.node.kind.clone(),
                operator_labels: n.node.operator_labels(),
                labels: n.labels,
                status: n.status,
                agent_version: n.node.agent_version.clone(),
                last_seen_age_ms: n.node.last_seen_at.map(|t| now - t),
                pipelines: n
                    .pipelines
                    .into_iter()
                    .map(|p| NodePipelineView {
                        pipeline_name: names
                            .get(&p.pipeline_id)
                            .cloned()
                            .unwrap_or_else(|| p.pipeline_id.clone()),
                        pipeline_id: p.pipeline_id,
                        version: p.version,
                        status: p.status,
                        events_in: p.events_in,
                        errors_total: p.errors_total,
                        message: p.message,
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// Audit entries a node's page shows, at most.
#[cfg(feature = "ssr")]
const NODE_HISTORY: i64 = 20;

/// One node's page: the fleet row, host metrics and agent health from its latest
/// heartbeat, component metrics per pipeline, its history and its newest 200 log lines.
#[server(endpoint = "node.get", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn get_node(node_id: String) -> Result<NodeDetailView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Node(&node_id)).await?;
    let now = ctl.now();
    let d = vf_control::fleet::node_detail(&ctl.db, &node_id, now)
        .await
        .map_err(fail)?;
    let names: std::collections::HashMap<String, String> =
        vf_control::pipelines::list_pipelines(&ctl.db, &d.view.node.environment_id)
            .await
            .map_err(fail)?
            .into_iter()
            .map(|p| (p.id, p.name))
            .collect();
    let name_of = |id: &str| names.get(id).cloned().unwrap_or_else(|| id.to_owned());
    let json_fields = |text: &Option<String>| {
        text.as_deref()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .map(|v| crate::types::flatten_json(&v))
            .unwrap_or_default()
    };
    let logs = vf_control::channel::recent_logs(&ctl.db, &node_id, None, 200)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|l| (name_of(&l.pipeline_id), l.at, l.line))
        .collect();
    let mut components = std::collections::BTreeMap::new();
    for p in &d.view.pipelines {
        let Some(version) = p.version else { continue };
        // A version the node reports that is gone (its pipeline deleted) offers nothing.
        if let Ok(v) = vf_control::pipelines::get_version(&ctl.db, &p.pipeline_id, version).await {
            components.insert(
                p.pipeline_id.clone(),
                vf_rules::config::components(&v.config_yaml),
            );
        }
    }
    let component_metrics = d
        .component_metrics
        .iter()
        .map(|(id, json)| (id.clone(), json_fields(&Some(json.clone()))))
        .collect();
    let filter = vf_control::audit::AuditFilter {
        target_kind: Some("node".into()),
        target_id: Some(node_id.clone()),
        ..Default::default()
    };
    let history = vf_control::audit::list(&ctl.db, &filter, NODE_HISTORY)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|e| (e.at, e.actor, e.action))
        .collect();
    let n = &d.view.node;
    Ok(NodeDetailView {
        component_metrics,
        history,
        components,
        live: n.kind == vf_control::agent::KIND_VF_AGENT && n.revoked_at.is_none(),
        now,
        environment_id: n.environment_id.clone(),
        hostname: n.hostname.clone(),
        os: n.os.clone(),
        vector_version: n.vector_version.clone(),
        enrolled_at: n.enrolled_at,
        last_seen_at: n.last_seen_at,
        revoked: n.revoked_at.is_some(),
        host_metrics: json_fields(&d.host_metrics),
        agent_health: json_fields(&d.agent_report),
        logs,
        node: NodeView {
            id: n.id.clone(),
            name: n.name.clone(),
            kind: n.kind.clone(),
            operator_labels: n.operator_labels(),
            labels: d.view.labels.clone(),
            status: d.view.status,
            agent_version: n.agent_version.clone(),
            last_seen_age_ms: n.last_seen_at.map(|t| now - t),
            pipelines: d
                .view
                .pipelines
                .iter()
                .map(|p| NodePipelineView {
                    pipeline_name: name_of(&p.pipeline_id),
                    pipeline_id: p.pipeline_id.clone(),
                    version: p.version,
                    status: p.status.clone(),
                    events_in: p.events_in,
                    errors_total: p.errors_total,
                    message: p.message.clone(),
                })
                .collect(),
        },
    })
}

/// Sets a node's operator labels, which win over the labels it reports.
#[server(endpoint = "fleet.node.labels", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn set_node_labels(node_id: String, labels: Labels) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Node(&node_id)).await?;
    vf_control::fleet::set_operator_labels(&ctl.db, &g.actor, &node_id, labels, ctl.now())
        .await
        .map_err(fail)?;
    Ok(())
}

/// The environment's node groups, each with how many nodes match now and the first 20 names.
#[server(endpoint = "fleet.groups", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_node_groups(environment_id: String) -> Result<Vec<GroupView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Environment(&environment_id)).await?;
    let groups = vf_control::fleet::list_node_groups(&ctl.db, &environment_id)
        .await
        .map_err(fail)?;
    let nodes = vf_control::fleet::list_nodes(&ctl.db, &environment_id)
        .await
        .map_err(fail)?;
    let labelled: Vec<(&str, Labels)> = nodes
        .iter()
        .map(|n| (n.name.as_str(), n.labels()))
        .collect();
    Ok(groups
        .into_iter()
        .map(|g| group_view(g, &labelled, |(name, labels)| (name, labels)))
        .collect())
}

/// A group with how many of `nodes` (by name) match it and the first of them; `key` gives a
/// node's name and the labels selection uses.
#[cfg(feature = "ssr")]
pub(crate) fn group_view<T>(
    g: vf_control::fleet::NodeGroupRow,
    nodes: &[T],
    key: impl Fn(&T) -> (&str, &Labels),
) -> GroupView {
    let criteria = g.criteria();
    let mut matching = nodes
        .iter()
        .map(key)
        .filter(|(_, labels)| vf_rules::labels_match(&criteria, labels));
    let matching_sample = matching
        .by_ref()
        .take(crate::preview::SAMPLE)
        .map(|(name, _)| name.to_string())
        .collect::<Vec<_>>();
    let matching_count = (matching_sample.len() + matching.count()) as i64;
    GroupView {
        id: g.id,
        name: g.name,
        criteria,
        matching_count,
        matching_sample,
    }
}

/// Creates a node group: a name for the nodes whose labels match `criteria`.
#[server(endpoint = "fleet.group.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn create_node_group(
    environment_id: String,
    name: String,
    criteria: Labels,
) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Environment(&environment_id)).await?;
    vf_control::fleet::create_node_group(
        &ctl.db,
        &g.actor,
        &environment_id,
        &name,
        criteria,
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(())
}

/// Deletes a node group.
#[server(endpoint = "fleet.group.delete", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn delete_node_group(id: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Group(&id)).await?;
    vf_control::fleet::delete_node_group(&ctl.db, &g.actor, &id, ctl.now())
        .await
        .map_err(fail)?;
    Ok(())
}

/// Revokes an enrollment token (agents can no longer enroll with it).
#[server(endpoint = "environment.token.revoke", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn revoke_enrollment_token(token_id: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::EnrollmentToken(&token_id)).await?;
    vf_control::fleet::revoke_enrollment_token(&ctl.db, &g.actor, &token_id, ctl.now())
        .await
        .map_err(fail)?;
    Ok(())
}

/// Revokes a node: its next poll gets 401.
#[server(endpoint = "fleet.node.revoke", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn revoke_node(node_id: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Node(&node_id)).await?;
    vf_control::fleet::revoke_node(&ctl.db, &g.actor, &node_id, ctl.now())
        .await
        .map_err(fail)?;
    Ok(())
}
