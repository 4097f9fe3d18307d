//! Server functions of pipelines: list, create, detail, versions, diff, direct deploy.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use crate::types::DiffLineView;
use crate::types::{
    DiffView, Labels, NodesQuery, PipelineDetail, PipelineNodesPage, PipelineSummary, VersionView,
};
#[cfg(feature = "ssr")]
use crate::types::{NodeCounts, PipelineNodeView};

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

/// Which stage (1-based) of the release added each node; empty without a readable release.
#[cfg(feature = "ssr")]
fn stage_of(
    release: Option<&vf_control::releases::StoredRelease>,
) -> std::collections::HashMap<&str, i64> {
    let Some(Ok(r)) = release else {
        return Default::default();
    };
    r.state
        .stages
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.node_ids.iter().map(move |id| (id.as_str(), i as i64 + 1)))
        .collect()
}

/// A node of the pipeline's environment as the pipeline's views count and list it.
#[cfg(feature = "ssr")]
struct NodeOfPipeline {
    node: vf_control::fleet::PipelineNode,
    served: vf_rules::Served,
    /// The stage (1-based) of the latest release that added it.
    stage: Option<i64>,
}

#[cfg(feature = "ssr")]
impl NodeOfPipeline {
    /// Whether the pipeline's nodeSelector admits it.
    fn admitted(&self) -> bool {
        !matches!(self.served, vf_rules::Served::NotSelected)
    }

    fn view(self) -> PipelineNodeView {
        let admitted = self.admitted();
        let n = self.node;
        let report = n.report.as_ref();
        PipelineNodeView {
            admitted,
            stage: self.stage,
            running_version: report.and_then(|r| r.version),
            process_status: report.map(|r| r.status.clone()),
            events_in: report.map(|r| r.events_in).unwrap_or(0),
            errors_total: report.map(|r| r.errors_total).unwrap_or(0),
            labels: std::sync::Arc::unwrap_or_clone(n.labels),
            node_id: n.id,
            node_name: n.name,
            node_status: n.status,
            served: self.served.kind(),
            served_version: self.served.version(),
        }
    }
}

/// Every node of the pipeline's environment, by name, with what it is served of the
/// pipeline and which stage of `release` added it.
#[cfg(feature = "ssr")]
async fn node_views(
    ctl: &vf_control::Control,
    p: &vf_control::pipelines::PipelineRow,
    release: Option<&vf_control::releases::StoredRelease>,
) -> vf_control::Result<Vec<NodeOfPipeline>> {
    let stage_of = stage_of(release);
    let fleet =
        vf_control::fleet::pipeline_nodes(&ctl.db, &p.environment_id, &p.id, ctl.now()).await?;
    let served = vf_control::delivery::served_nodes(
        ctl,
        p,
        fleet.iter().map(|n| (n.id.as_str(), &*n.labels)),
    )
    .await?;
    Ok(fleet
        .into_iter()
        .zip(served)
        .map(|(node, served)| NodeOfPipeline {
            stage: stage_of.get(node.id.as_str()).copied(),
            served,
            node,
        })
        .collect())
}

/// Canary nodes whose logs the rollout view shows, at most.
#[cfg(feature = "ssr")]
const CANARY_LOG_NODES: usize = 10;
/// Canary nodes whose logs are read, at most (the first targeted).
#[cfg(feature = "ssr")]
const CANARY_LOG_CANDIDATES: usize = 100;
/// Lines shown per canary node.
#[cfg(feature = "ssr")]
const CANARY_LOG_LINES: i64 = 20;

/// The newest lines of the release's canary nodes (targeted by a stage so far), nodes with
/// error lines first, each node's error lines first.
#[cfg(feature = "ssr")]
async fn canary_logs_of(
    ctl: &vf_control::Control,
    pipeline_id: &str,
    nodes: &[NodeOfPipeline],
) -> vf_control::Result<Vec<crate::types::CanaryLogs>> {
    use vf_control::channel::{is_error_line, recent_logs_of};
    let mut canary: Vec<&NodeOfPipeline> = nodes.iter().filter(|n| n.stage.is_some()).collect();
    canary.sort_by_key(|n| (n.stage, n.node.name.clone()));
    // The earliest-targeted nodes are the canaries proper; a late stage's thousands are not
    // read line by line here.
    canary.truncate(CANARY_LOG_CANDIDATES);
    let ids: Vec<String> = canary.iter().map(|n| n.node.id.clone()).collect();
    let lines = recent_logs_of(&ctl.db, pipeline_id, &ids, CANARY_LOG_LINES).await?;
    let mut out: Vec<crate::types::CanaryLogs> = canary
        .iter()
        .map(|n| {
            let mut mine: Vec<(i64, String, bool)> = lines
                .iter()
                .filter(|(id, _)| *id == n.node.id)
                .map(|(_, l)| (l.at, l.line.clone(), is_error_line(&l.line)))
                .collect();
            // Stable: errors first, each part oldest first.
            mine.sort_by_key(|(_, _, error)| !*error);
            crate::types::CanaryLogs {
                node_id: n.node.id.clone(),
                node_name: n.node.name.clone(),
                stage: n.stage.unwrap_or_default(),
                errors: mine.iter().filter(|l| l.2).count() as i64,
                lines: mine,
            }
        })
        .filter(|c| !c.lines.is_empty())
        .collect();
    out.sort_by_key(|c| c.errors == 0);
    out.truncate(CANARY_LOG_NODES);
    Ok(out)
}

/// The nodes counted by agent status, process status and running version.
#[cfg(feature = "ssr")]
fn counts<'a>(nodes: impl Iterator<Item = &'a NodeOfPipeline>) -> NodeCounts {
    use std::collections::BTreeMap;
    let mut total = 0;
    let mut statuses = Vec::new();
    let mut by_process: BTreeMap<Option<&str>, i64> = BTreeMap::new();
    let mut by_running: BTreeMap<Option<i64>, i64> = BTreeMap::new();
    for n in nodes {
        let report = n.node.report.as_ref();
        total += 1;
        statuses.push(n.node.status);
        *by_process
            .entry(report.map(|r| r.status.as_str()))
            .or_default() += 1;
        *by_running
            .entry(report.and_then(|r| r.version))
            .or_default() += 1;
    }
    NodeCounts {
        total,
        by_status: vf_rules::NodeStatus::tally(statuses)
            .into_iter()
            .map(|(s, n)| (s, n as i64))
            .collect(),
        by_process: by_process
            .into_iter()
            .map(|(s, n)| (s.map(str::to_string), n))
            .collect(),
        by_running: by_running.into_iter().rev().collect(),
    }
}

/// The environment's pipelines.
#[server(endpoint = "pipeline.list", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_pipelines(environment_id: String) -> Result<Vec<PipelineSummary>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Environment(&environment_id)).await?;
    let rows = vf_control::pipelines::list_pipelines(&ctl.db, &environment_id)
        .await
        .map_err(fail)?;
    Ok(rows.into_iter().map(summary).collect())
}

/// Creates a pipeline whose versions go to the nodes `node_selector` admits.
#[server(endpoint = "pipeline.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
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

/// One pipeline's summary, without its versions, release or nodes: one row at any fleet size.
#[server(endpoint = "pipeline.summary", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn get_pipeline_summary(id: String) -> Result<PipelineSummary, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Pipeline(&id)).await?;
    let p = vf_control::pipelines::get_pipeline(&ctl.db, &id)
        .await
        .map_err(fail)?;
    Ok(summary(p))
}

/// The pipeline with everything its page shows, counted, never a list of nodes unless
/// `nodes` asks for a page of them (read with the counts: they agree).
#[server(endpoint = "pipeline.get", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn get_pipeline(
    id: String,
    #[server(default)] nodes: Option<NodesQuery>,
) -> Result<PipelineDetail, ServerFnError> {
    use super::server::*;
    use crate::types::EnvironmentView;
    use vf_control::access::{Role, Target};
    use vf_control::{fleet, pipelines};
    let (ctl, g) = authorize(Role::Viewer, Target::Pipeline(&id)).await?;
    let cut = nodes
        .as_ref()
        .map(NodesCut::parse)
        .transpose()
        .map_err(fail)?;
    let p = pipelines::get_pipeline(&ctl.db, &id).await.map_err(fail)?;
    let env = fleet::get_environment(&ctl.db, &p.environment_id)
        .await
        .map_err(fail)?;
    let versions = pipelines::list_versions(&ctl.db, &id).await.map_err(fail)?;
    let deployed_config = p
        .deployed_version
        .and_then(|d| versions.iter().find(|v| v.version == d))
        .map(|v| v.config_yaml.clone());
    let stored = vf_control::releases::latest_release(&ctl, &id)
        .await
        .map_err(fail)?;
    let nodes = node_views(&ctl, &p, stored.as_ref()).await.map_err(fail)?;
    let release = stored.map(|r| crate::api::releases::release_view(r, ctl.now(), &g));
    let admitted = counts(nodes.iter().filter(|n| n.admitted()));
    let excluded = nodes.iter().filter(|n| !n.admitted()).count() as i64;
    let mut release = release;
    let mut waiting = crate::types::WaitingNodes::default();
    let mut canary_logs = Vec::new();
    if let Some(r) = release.as_mut() {
        for (i, stage) in r.stages.iter_mut().enumerate() {
            let number = Some(i as i64 + 1);
            stage.counts = counts(nodes.iter().filter(|n| n.stage == number));
        }
        if r.in_flight() {
            let not_targeted = nodes.iter().filter(|n| n.admitted() && n.stage.is_none());
            waiting.count = not_targeted.clone().count() as i64;
            waiting.sample = not_targeted
                .take(crate::preview::SAMPLE)
                .map(|n| (n.node.id.clone(), n.node.name.clone(), n.served.version()))
                .collect();
            canary_logs = canary_logs_of(&ctl, &p.id, &nodes).await.map_err(fail)?;
        }
    }
    let groups = fleet::list_node_groups(&ctl.db, &p.environment_id)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|g| {
            crate::api::fleet::group_view(g, &nodes, |n| (n.node.name.as_str(), &*n.node.labels))
        })
        .collect();
    Ok(PipelineDetail {
        nodes: cut.map(|c| c.apply(nodes)),
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
        admitted,
        excluded,
        waiting,
        canary_logs,
    })
}

/// One page of the pipeline's nodes (those its nodeSelector admits), by name, as
/// [`NodesQuery`] asks.
#[server(endpoint = "pipeline.nodes", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
#[allow(clippy::too_many_arguments)]
pub async fn pipeline_nodes(
    pipeline_id: String,
    #[server(default)] name: Option<String>,
    #[server(default)] label: Option<String>,
    #[server(default)] status: Option<vf_rules::NodeStatus>,
    #[server(default)] stage: Option<String>,
    #[server(default)] offset: Option<i64>,
    #[server(default)] limit: Option<i64>,
) -> Result<PipelineNodesPage, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Pipeline(&pipeline_id)).await?;
    let cut = NodesCut::parse(&NodesQuery {
        name,
        label,
        status,
        stage,
        offset,
        limit,
    })
    .map_err(fail)?;
    let p = vf_control::pipelines::get_pipeline(&ctl.db, &pipeline_id)
        .await
        .map_err(fail)?;
    let stored = vf_control::releases::latest_release(&ctl, &pipeline_id)
        .await
        .map_err(fail)?;
    let nodes = node_views(&ctl, &p, stored.as_ref()).await.map_err(fail)?;
    Ok(cut.apply(nodes))
}

/// A [`NodesQuery`], checked.
#[cfg(feature = "ssr")]
struct NodesCut {
    filter: vf_control::fleet::NodeFilter,
    page: vf_control::fleet::PageRequest,
    /// A stage number, or `Some(None)`: the nodes no stage targeted.
    stage: Option<Option<i64>>,
}

#[cfg(feature = "ssr")]
impl NodesCut {
    fn parse(q: &NodesQuery) -> vf_control::Result<NodesCut> {
        use vf_control::fleet::{NodeFilter, PageRequest};
        let stage = match q.stage.as_deref().map(str::trim) {
            None | Some("") => None,
            Some("none") => Some(None),
            Some(n) => match n.parse::<i64>() {
                Ok(n) if n >= 1 => Some(Some(n)),
                _ => {
                    return Err(vf_control::ControlError::invalid(
                        "stage",
                        "a stage number (1, 2, ...) or none",
                    ))
                }
            },
        };
        Ok(NodesCut {
            filter: NodeFilter::parse(q.name.as_deref(), q.label.as_deref(), q.status)?,
            page: PageRequest::parse(q.offset, q.limit)?,
            stage,
        })
    }

    /// The page of the admitted `nodes` it asks for.
    fn apply(&self, nodes: Vec<NodeOfPipeline>) -> PipelineNodesPage {
        let nodes: Vec<_> = nodes.into_iter().filter(|n| n.admitted()).collect();
        let total = nodes.len() as i64;
        let nodes: Vec<_> = match self.stage {
            None => nodes,
            Some(number) => nodes.into_iter().filter(|n| n.stage == number).collect(),
        };
        let found = vf_control::fleet::cut(nodes, &self.filter, self.page, |n| {
            (n.node.name.as_str(), &*n.node.labels, n.node.status)
        });
        PipelineNodesPage {
            total,
            matched: found.matched as i64,
            offset: self.page.offset as i64,
            limit: self.page.limit as i64,
            nodes: found.rows.into_iter().map(NodeOfPipeline::view).collect(),
        }
    }
}

/// The config body of one version of a pipeline.
#[server(endpoint = "pipeline.version.config", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
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
#[server(endpoint = "pipeline.deploy", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn deploy_pipeline(
    pipeline_id: String,
    config_yaml: String,
    changelog: String,
    #[server(default)] reason: Option<String>,
    #[server(default)] override_freeze: bool,
) -> Result<VersionView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{self, Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Pipeline(&pipeline_id)).await?;
    // Only an admin deploys through a freeze window, and says why.
    if override_freeze {
        access::check(Some(g.role), Role::Admin, "this pipeline's environment").map_err(fail)?;
    }
    vf_control::pipelines::parse_config(&config_yaml).map_err(fail)?;
    vf_control::config_check::validate(ctl.settings.config_validator.as_ref(), &config_yaml)
        .await
        .map_err(fail)?;
    let reason = vf_control::releases::operator_reason(reason).map_err(fail)?;
    let v = vf_control::pipelines::deploy_noted(
        &ctl.db,
        &g.actor,
        &pipeline_id,
        &config_yaml,
        &changelog,
        reason.as_deref(),
        override_freeze.then(|| reason.as_deref().unwrap_or_default()),
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(version_view(v))
}

/// A diff between two versions; without `from`/`to`, the two newest (or the only one).
#[server(endpoint = "pipeline.diff", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
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

/// What the latest release of the pipeline changes: its previous version's config against its
/// canary's (against nothing on a first deploy). `None` before any release.
#[server(endpoint = "pipeline.release_diff", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn release_diff(pipeline_id: String) -> Result<Option<DiffView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Pipeline(&pipeline_id)).await?;
    let Some(release) = vf_control::releases::latest_release(&ctl, &pipeline_id)
        .await
        .map_err(fail)?
    else {
        return Ok(None);
    };
    let (canary, previous) = match &release {
        Ok(r) => (r.canary_version, r.previous_version),
        Err(e) => (e.row.canary_version, e.row.previous_version),
    };
    let config = |version: i64| {
        let ctl = ctl.clone();
        let pipeline_id = pipeline_id.clone();
        async move {
            vf_control::pipelines::get_version(&ctl.db, &pipeline_id, version)
                .await
                .map(|v| v.config_yaml)
                .map_err(fail)
        }
    };
    let new = config(canary).await?;
    let old = match previous {
        Some(v) => config(v).await?,
        None => String::new(),
    };
    Ok(Some(DiffView {
        from: previous.unwrap_or(0),
        to: canary,
        versions: Vec::new(),
        lines: vf_control::pipelines::diff_lines(&old, &new)
            .into_iter()
            .map(|l| DiffLineView {
                op: l.op.to_string(),
                text: l.text,
            })
            .collect(),
    }))
}
