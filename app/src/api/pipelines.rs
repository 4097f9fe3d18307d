//! Server functions of pipelines: list, create, detail, versions, diff, direct deploy.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;

#[cfg(feature = "ssr")]
use crate::types::DiffLineView;
use crate::types::{DiffView, Labels, PipelineDetail, PipelineSummary, VersionView};

#[cfg(feature = "ssr")]
fn summary(p: vf_control::pipelines::PipelineRow) -> PipelineSummary {
    PipelineSummary {
        node_selector: p.node_selector(),
        id: p.id,
        environment_id: p.environment_id,
        name: p.name,
        deployed_version: p.deployed_version,
        updated_at: p.updated_at,
    }
}

#[cfg(feature = "ssr")]
fn version_view(v: vf_control::pipelines::VersionRow) -> VersionView {
    VersionView {
        version: v.version,
        checksum: v.checksum,
        changelog: v.changelog,
        author: v.author,
        created_at: v.created_at,
    }
}

#[server(endpoint = "pipeline.list", input = Json)]
pub async fn list_pipelines(environment_id: String) -> Result<Vec<PipelineSummary>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Environment(&environment_id)).await?;
    let rows = vf_control::pipelines::list_pipelines(&ctl.db, &environment_id)
        .await
        .map_err(fail)?;
    Ok(rows.into_iter().map(summary).collect())
}

#[server(endpoint = "pipeline.create", input = Json)]
pub async fn create_pipeline(
    environment_id: String,
    name: String,
    node_selector: Labels,
) -> Result<PipelineSummary, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Environment(&environment_id)).await?;
    let row = vf_control::pipelines::create_pipeline(
        &ctl.db,
        &g.actor,
        &environment_id,
        &name,
        node_selector,
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(summary(row))
}

#[server(endpoint = "pipeline.get", input = Json)]
pub async fn get_pipeline(id: String) -> Result<PipelineDetail, ServerFnError> {
    use super::server::*;
    use crate::types::{EnvironmentView, PipelineNodeView};
    use vf_control::access::{Role, Target};
    use vf_control::{delivery, fleet, pipelines};
    let (ctl, g) = authorize(Role::Viewer, Target::Pipeline(&id)).await?;
    let p = pipelines::get_pipeline(&ctl.db, &id).await.map_err(fail)?;
    let env = fleet::get_environment(&ctl.db, &p.environment_id)
        .await
        .map_err(fail)?;
    let versions = pipelines::list_versions(&ctl.db, &id).await.map_err(fail)?;
    let deployed_config = p
        .deployed_version
        .and_then(|d| versions.iter().find(|v| v.version == d))
        .map(|v| v.config_yaml.clone());
    let fleet = fleet::fleet(&ctl.db, &p.environment_id, ctl.now())
        .await
        .map_err(fail)?;
    let rows: Vec<_> = fleet.iter().map(|n| n.node.clone()).collect();
    let served = delivery::served_nodes(&ctl, &p, &rows)
        .await
        .map_err(fail)?;
    let nodes = fleet
        .into_iter()
        .zip(served)
        .map(|(n, s)| {
            let report = n.pipelines.iter().find(|r| r.pipeline_id == id);
            PipelineNodeView {
                admitted: !matches!(s, vf_rules::Served::NotSelected),
                labels: n.labels.clone(),
                node_id: n.node.id.clone(),
                node_name: n.node.name.clone(),
                node_status: n.status,
                served: s.kind(),
                served_version: s.version(),
                running_version: report.and_then(|r| r.version),
                process_status: report.map(|r| r.status.clone()),
                events_in: report.map(|r| r.events_in).unwrap_or(0),
                errors_total: report.map(|r| r.errors_total).unwrap_or(0),
            }
        })
        .collect();
    let groups = fleet::list_node_groups(&ctl.db, &p.environment_id)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|g| {
            let criteria = g.criteria();
            let matching_nodes = rows
                .iter()
                .filter(|n| vf_rules::labels_match(&criteria, &n.labels()))
                .map(|n| n.name.clone())
                .collect();
            crate::types::GroupView {
                id: g.id,
                name: g.name,
                criteria,
                matching_nodes,
            }
        })
        .collect();
    let release = vf_control::releases::list_releases(&ctl, &id)
        .await
        .map_err(fail)?
        .into_iter()
        .next()
        .map(|r| crate::api::releases::release_view(r, ctl.now(), &g));
    Ok(PipelineDetail {
        groups,
        prometheus_configured: ctl.settings.prometheus.is_some(),
        release,
        pipeline: summary(p),
        environment: EnvironmentView {
            id: env.id,
            name: env.name,
        },
        versions: versions.into_iter().map(version_view).collect(),
        deployed_config,
        nodes,
    })
}

#[server(endpoint = "pipeline.version.config", input = Json)]
pub async fn version_config(pipeline_id: String, version: i64) -> Result<String, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Pipeline(&pipeline_id)).await?;
    let v = vf_control::pipelines::get_version(&ctl.db, &pipeline_id, version)
        .await
        .map_err(fail)?;
    Ok(v.config_yaml)
}

/// Publishes a new version and deploys it to every eligible node.
#[server(endpoint = "pipeline.deploy", input = Json)]
pub async fn deploy_pipeline(
    pipeline_id: String,
    config_yaml: String,
    changelog: String,
) -> Result<VersionView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Pipeline(&pipeline_id)).await?;
    let v = vf_control::pipelines::deploy(
        &ctl.db,
        &g.actor,
        &pipeline_id,
        &config_yaml,
        &changelog,
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(version_view(v))
}

/// A diff between two versions; without `from`/`to`, the two newest (or the only one).
#[server(endpoint = "pipeline.diff", input = Json)]
pub async fn diff_versions(
    pipeline_id: String,
    #[server(default)] from: Option<i64>,
    #[server(default)] to: Option<i64>,
) -> Result<DiffView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Pipeline(&pipeline_id)).await?;
    let versions: Vec<i64> = vf_control::pipelines::list_versions(&ctl.db, &pipeline_id)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|v| v.version)
        .collect();
    let Some(newest) = versions.first().copied() else {
        return Ok(DiffView {
            from: 0,
            to: 0,
            versions,
            lines: Vec::new(),
        });
    };
    let to = to.unwrap_or(newest);
    let from = from.unwrap_or((newest - 1).max(1));
    let lines = vf_control::pipelines::diff_versions(&ctl.db, &pipeline_id, from, to)
        .await
        .map_err(fail)?;
    Ok(DiffView {
        from,
        to,
        versions,
        lines: lines
            .into_iter()
            .map(|l| DiffLineView {
                op: l.op.to_string(),
                text: l.text,
            })
            .collect(),
    })
}
