//! Server functions of releases: create a canary (progressive or plan-less), read, list,
//! and the operator actions. JSON in and out, so CI pipelines drive releases with curl.

// A server function takes one argument per field of its JSON body (the wire format is the
// argument list), and the macro's generated items do not carry an item-level allow.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{ReleaseCharts, ReleaseHistoryItem, ReleaseView, StageSeries};

/// The release as `granted` may see it: `allowed_actions` keeps only the actions the state
/// allows *and* the caller's role may take, so pages show exactly the buttons that work. An
/// unreadable release shows what could be read and the reason; the state machine cannot
/// judge it, so the only button is Rollback, while its stored status is in flight.
#[cfg(feature = "ssr")]
pub(crate) fn release_view(
    stored: vf_control::releases::StoredRelease,
    now: i64,
    granted: &vf_control::access::Granted,
) -> ReleaseView {
    use crate::types::{EvaluationView, StageView};
    let may = |action: vf_rules::Action, created_by: &str| {
        vf_control::access::role_for_release_action(action, created_by, &granted.actor.name)
            <= granted.role
    };
    let r = match stored {
        Ok(r) => r,
        Err(e) => {
            let status = vf_rules::ReleaseStatus::parse(&e.row.status);
            let rollback = vf_rules::Action::Rollback;
            let allowed = status.is_some_and(|s| s.in_flight()) && may(rollback, &e.row.created_by);
            return unreadable_view(e, status, allowed.then_some(rollback), now);
        }
    };
    let allowed_actions = r
        .state
        .allowed_actions()
        .into_iter()
        .filter(|a| may(*a, &r.created_by))
        .collect();
    let s = r.state;
    ReleaseView {
        stages: s
            .stages
            .into_iter()
            .map(|st| StageView {
                index: st.index as i64,
                node_count: st.node_ids.len() as i64,
                counts: Default::default(),
                started_at: st.started_at,
                bake_deadline: st.bake_deadline,
                evaluations: st
                    .evaluations
                    .into_iter()
                    .map(|e| EvaluationView {
                        at: e.at,
                        trigger: e.trigger,
                        actor: e.actor,
                        results: e.results,
                        decision: e.decision,
                    })
                    .collect(),
                outcome: st.outcome,
                checks: st.checks,
                refused: st.refused,
            })
            .collect(),
        planless: s.planless,
        id: r.id,
        pipeline_id: r.pipeline_id,
        canary_version: r.canary_version,
        previous_version: r.previous_version,
        status: Some(s.status),
        unreadable: None,
        stage_count: s.plan.stages().len() as i64,
        plan: Some(s.plan),
        current_stage: s.current_stage as i64,
        bake_deadline: s.bake_deadline,
        baseline_eps: r.baseline_eps,
        hold_reason: s.hold_reason,
        failure_reason: s.failure_reason,
        created_by: r.created_by,
        updated_by: r.updated_by,
        created_at: r.created_at,
        updated_at: r.updated_at,
        completed_at: s.completed_at,
        row_version: r.row_version,
        allowed_actions,
        now,
        paused: s.paused,
        notes: s.notes,
    }
}

#[cfg(feature = "ssr")]
fn unreadable_view(
    e: vf_control::releases::Unreadable,
    status: Option<vf_rules::ReleaseStatus>,
    rollback: Option<vf_rules::Action>,
    now: i64,
) -> ReleaseView {
    let unreadable = Some(format!(
        "release state unreadable: {}: {}",
        e.field, e.message
    ));
    let r = *e.row;
    ReleaseView {
        status,
        unreadable,
        id: r.id,
        pipeline_id: r.pipeline_id,
        canary_version: r.canary_version,
        previous_version: r.previous_version,
        planless: r.planless != 0,
        plan: None,
        stage_count: 0,
        current_stage: r.current_stage,
        stages: Vec::new(),
        bake_deadline: r.bake_deadline,
        baseline_eps: r.baseline_eps,
        hold_reason: r.hold_reason,
        failure_reason: r.failure_reason,
        created_by: r.created_by,
        updated_by: r.updated_by,
        created_at: r.created_at,
        updated_at: r.updated_at,
        completed_at: r.completed_at,
        row_version: r.row_version,
        allowed_actions: rollback.into_iter().collect(),
        now,
        paused: None,
        notes: Vec::new(),
    }
}

/// Creates a canary release: either `rollout_plan` (progressive, camelCase plan JSON) or
/// `canary_selector` + `health_check_window_minutes` (plan-less).
#[server(endpoint = "release.canary.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn create_canary(
    pipeline_id: String,
    config_yaml: String,
    #[server(default)] changelog: String,
    #[server(default)] rollout_plan: Option<vf_rules::Unparsed<vf_rules::RolloutPlan>>,
    #[server(default)] canary_selector: Option<vf_rules::Unparsed<vf_rules::CanarySelector>>,
    #[server(default)] health_check_window_minutes: Option<i64>,
    #[server(default)] release_id: Option<String>,
    #[server(default)] override_freeze: bool,
    #[server(default)] reason: Option<String>,
) -> Result<ReleaseView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{self, Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Pipeline(&pipeline_id)).await?;
    // Only an admin goes through a freeze window, and says why.
    let freeze_override = if override_freeze {
        access::check(Some(g.role), Role::Admin, "this pipeline's environment").map_err(fail)?;
        Some(reason.unwrap_or_default())
    } else {
        None
    };
    let req = vf_control::releases::CanaryRequest {
        pipeline_id,
        config_yaml,
        changelog,
        rollout_plan: rollout_plan.map(|plan| plan.json),
        canary_selector: canary_selector.map(|selector| selector.json),
        health_check_window_minutes,
        release_id,
        freeze_override,
    };
    let r = vf_control::releases::create_canary(&ctl, &g.actor, req)
        .await
        .map_err(fail)?;
    Ok(release_view(Ok(r), ctl.now(), &g))
}

/// What a PromQL query gives now, for the plan editor's "Test query".
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PromqlTestView {
    /// The query's one number, when it gave one.
    pub value: Option<f64>,
    /// Whether the value compares to the threshold as the gate would; `None` without a
    /// value or a readable threshold and comparator.
    pub passes: Option<bool>,
    /// What came back, as the gate's evidence or the create-time preflight would say it.
    pub text: String,
}

/// Runs `query` once against the server's Prometheus, as a `customPromQL` gate and the
/// create-time preflight do, and compares it with `threshold` when one is given.
#[server(endpoint = "promql.test", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn test_promql(
    query: String,
    #[server(default)] comparator: String,
    #[server(default)] threshold: Option<f64>,
) -> Result<PromqlTestView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::ControlError;
    let (ctl, _) = authorize(Role::Viewer, Target::Any).await?;
    if query.trim().is_empty() {
        return Err(fail(ControlError::invalid(
            "query",
            "must be a non-empty string",
        )));
    }
    let Some(settings) = &ctl.settings.prometheus else {
        return Err(fail(ControlError::invalid(
            "query",
            "PromQL gates need VF_PROMETHEUS_URL, which this server does not have",
        )));
    };
    let outcome = vf_control::promql::instant_query(&ctl.http, settings, &query).await;
    let compare = vf_rules::Comparator::parse(&comparator).zip(threshold);
    Ok(match (vf_rules::preflight(&outcome), compare) {
        (Err(why), _) => PromqlTestView {
            value: None,
            passes: None,
            text: why,
        },
        (Ok(value), Some((comparator, threshold))) => {
            let r = vf_rules::custom_promql(&query, comparator, threshold, Some(&outcome));
            PromqlTestView {
                value: Some(value),
                passes: Some(r.passed()),
                text: r.reason,
            }
        }
        (Ok(value), None) => PromqlTestView {
            value: Some(value),
            passes: None,
            text: format!("query result {value}"),
        },
    })
}

/// A fresh release id: the deploy dialog previews percentage stages with it (ranking
/// depends on the release id) and passes it to `release.canary.create`.
#[server(endpoint = "release.new_id", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn new_release_id() -> Result<String, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    authorize(Role::Viewer, Target::Any).await?;
    Ok(vf_control::ids::new_id())
}

/// Which nodes each stage would add if a release with id `release_id` were created now with
/// these stage selectors: counts and the first names (see [`crate::preview`]).
#[server(endpoint = "release.preview", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn preview_release(
    pipeline_id: String,
    release_id: String,
    selectors: Vec<vf_rules::Unparsed<vf_rules::Selector>>,
) -> Result<crate::preview::PreviewView, ServerFnError> {
    use super::server::*;
    use crate::preview::{FleetNode, GroupRef, PreviewView, Selection};
    use vf_control::access::{Role, Target};
    use vf_control::fleet;
    let (ctl, _) = authorize(Role::Viewer, Target::Pipeline(&pipeline_id)).await?;
    if selectors.len() > vf_rules::plan::MAX_STAGES {
        return Err(fail(vf_control::ControlError::invalid(
            "selectors",
            format!("at most {} stages", vf_rules::plan::MAX_STAGES),
        )));
    }
    let p = vf_control::pipelines::get_pipeline(&ctl.db, &pipeline_id)
        .await
        .map_err(fail)?;
    let node_selector = p.node_selector();
    let nodes = fleet::list_nodes(&ctl.db, &p.environment_id)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|n| {
            let labels = n.labels();
            FleetNode {
                admitted: vf_rules::labels_match(&node_selector, &labels),
                id: n.id,
                name: n.name,
                labels,
            }
        })
        .collect();
    let groups = fleet::list_node_groups(&ctl.db, &p.environment_id)
        .await
        .map_err(fail)?
        .into_iter()
        .map(|g| GroupRef {
            criteria: g.criteria(),
            id: g.id,
            name: g.name,
        })
        .collect();
    let selectors: Vec<serde_json::Value> = selectors.into_iter().map(|s| s.json).collect();
    Ok(PreviewView::of(
        &release_id,
        &selectors,
        &Selection { nodes, groups },
    ))
}

/// A release: its plan, stages, gate evidence, bake deadline and the actions the caller may take.
#[server(endpoint = "release.canary.get", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn get_release(release_id: String) -> Result<ReleaseView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Viewer, Target::Release(&release_id)).await?;
    let r = vf_control::releases::load_release(&ctl, &release_id)
        .await
        .map_err(fail)?;
    Ok(release_view(r, ctl.now(), &g))
}

/// The node ids stage `stage` (1-based) of the release added, a page at a time (`offset`,
/// `limit` up to 500, default 50), in the order selection picked them.
#[server(endpoint = "release.stage.nodes", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn stage_nodes(
    release_id: String,
    stage: i64,
    #[server(default)] offset: Option<i64>,
    #[server(default)] limit: Option<i64>,
) -> Result<crate::types::StageNodesPage, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::ControlError;
    let (ctl, _) = authorize(Role::Viewer, Target::Release(&release_id)).await?;
    let page = vf_control::fleet::PageRequest::parse(offset, limit).map_err(fail)?;
    let r = vf_control::releases::get_release(&ctl, &release_id)
        .await
        .map_err(fail)?;
    let started = r.state.stages.len() as i64;
    let Some(s) = usize::try_from(stage - 1)
        .ok()
        .and_then(|i| r.state.stages.get(i))
    else {
        return Err(fail(ControlError::invalid(
            "stage",
            format!("a started stage of this release: 1 to {started}"),
        )));
    };
    Ok(crate::types::StageNodesPage {
        total: s.node_ids.len() as i64,
        offset: page.offset as i64,
        limit: page.limit as i64,
        node_ids: s
            .node_ids
            .iter()
            .skip(page.offset)
            .take(page.limit)
            .cloned()
            .collect(),
    })
}

/// A pipeline's releases, newest first.
#[server(endpoint = "release.list", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_releases(pipeline_id: String) -> Result<Vec<ReleaseView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Viewer, Target::Pipeline(&pipeline_id)).await?;
    let rows = vf_control::releases::list_releases(&ctl, &pipeline_id)
        .await
        .map_err(fail)?;
    let now = ctl.now();
    Ok(rows.into_iter().map(|r| release_view(r, now, &g)).collect())
}

#[cfg(feature = "ssr")]
async fn act(
    release_id: String,
    action: vf_rules::Action,
    reason: Option<String>,
    override_freeze: bool,
) -> Result<ReleaseView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{self, role_for_release_action, Role, Target};
    let (ctl, g) = authorize(Role::Viewer, Target::Release(&release_id)).await?;
    let creator = vf_control::releases::release_creator(&ctl, &release_id)
        .await
        .map_err(fail)?;
    let need = role_for_release_action(action, &creator, &g.actor.name);
    access::check(Some(g.role), need, "this release's environment").map_err(fail)?;
    if override_freeze {
        access::check(Some(g.role), Role::Admin, "this release's environment").map_err(fail)?;
    }
    let r = vf_control::releases::act_with_reason(
        &ctl,
        &g.actor,
        &release_id,
        action,
        reason,
        override_freeze,
    )
    .await
    .map_err(fail)?;
    Ok(release_view(r, ctl.now(), &g))
}

/// Re-evaluates the current stage's gates and starts the next stage; refuses (409, kept as
/// a refused attempt) when one does not pass. `reason` (optional, at most 500 characters) is
/// kept on the release and in the audit event, as for every action below.
#[server(endpoint = "release.canary.advance", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn advance_release(
    release_id: String,
    #[server(default)] reason: Option<String>,
    #[server(default)] override_freeze: bool,
) -> Result<ReleaseView, ServerFnError> {
    act(
        release_id,
        vf_rules::Action::Advance,
        reason,
        override_freeze,
    )
    .await
}

/// Re-evaluates the current stage's gates and completes the release.
#[server(endpoint = "release.canary.complete", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn complete_release(
    release_id: String,
    #[server(default)] reason: Option<String>,
    #[server(default)] override_freeze: bool,
) -> Result<ReleaseView, ServerFnError> {
    act(
        release_id,
        vf_rules::Action::Complete,
        reason,
        override_freeze,
    )
    .await
}

/// Plan-less canaries: the same as complete.
#[server(endpoint = "release.canary.broaden", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn broaden_release(
    release_id: String,
    #[server(default)] reason: Option<String>,
    #[server(default)] override_freeze: bool,
) -> Result<ReleaseView, ServerFnError> {
    act(
        release_id,
        vf_rules::Action::Broaden,
        reason,
        override_freeze,
    )
    .await
}

/// Publishes the previous config as a new version and deploys it (or undeploys a first
/// deploy); ends fencing. Allowed while paused.
#[server(endpoint = "release.canary.rollback", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn rollback_release(
    release_id: String,
    #[server(default)] reason: Option<String>,
) -> Result<ReleaseView, ServerFnError> {
    act(release_id, vf_rules::Action::Rollback, reason, false).await
}

/// Stops the bake clock and the scheduler for this release until resumed.
#[server(endpoint = "release.canary.pause", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn pause_release(
    release_id: String,
    #[server(default)] reason: Option<String>,
) -> Result<ReleaseView, ServerFnError> {
    act(release_id, vf_rules::Action::Pause, reason, false).await
}

/// Resumes a paused release with the bake time it had left.
#[server(endpoint = "release.canary.resume", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn resume_release(
    release_id: String,
    #[server(default)] reason: Option<String>,
) -> Result<ReleaseView, ServerFnError> {
    act(release_id, vf_rules::Action::Resume, reason, false).await
}

#[cfg(feature = "ssr")]
async fn series_of(
    ctl: &vf_control::Control,
    r: &vf_control::releases::StoredRelease,
) -> Result<Vec<StageSeries>, ServerFnError> {
    // An unreadable release has no stages to chart.
    let Ok(r) = r else {
        return Ok(Vec::new());
    };
    let series = vf_control::releases::stage_series(&ctl.db, r, ctl.now())
        .await
        .map_err(super::server::fail)?;
    Ok(series
        .into_iter()
        .enumerate()
        .map(|(i, points)| StageSeries {
            index: i as i64,
            points: points
                .into_iter()
                .map(|p| (p.minute, p.events_in, p.errors))
                .collect(),
        })
        .collect())
}

/// Per-stage minutes of events and errors of the canary nodes, for the history charts.
#[server(endpoint = "release.series", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn release_series(release_id: String) -> Result<Vec<StageSeries>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Release(&release_id)).await?;
    let r = vf_control::releases::load_release(&ctl, &release_id)
        .await
        .map_err(fail)?;
    series_of(&ctl, &r).await
}

/// The per-stage series of the pipeline's latest release, for the rollout card's live
/// charts; `None` before any release.
#[server(endpoint = "pipeline.release_series", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn latest_release_series(
    pipeline_id: String,
) -> Result<Option<ReleaseCharts>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Pipeline(&pipeline_id)).await?;
    let Some(r) = vf_control::releases::latest_release(&ctl, &pipeline_id)
        .await
        .map_err(fail)?
    else {
        return Ok(None);
    };
    let release_id = match &r {
        Ok(r) => r.id.clone(),
        Err(e) => e.row.id.clone(),
    };
    let stages = series_of(&ctl, &r).await?;
    Ok(Some(ReleaseCharts { release_id, stages }))
}

/// A pipeline's releases, newest first, each with its per-stage series.
#[server(endpoint = "release.history", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn release_history(
    pipeline_id: String,
) -> Result<Vec<ReleaseHistoryItem>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Viewer, Target::Pipeline(&pipeline_id)).await?;
    let rows = vf_control::releases::list_releases(&ctl, &pipeline_id)
        .await
        .map_err(fail)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let series = series_of(&ctl, &r).await?;
        out.push(ReleaseHistoryItem {
            release: release_view(r, ctl.now(), &g),
            series,
        });
    }
    Ok(out)
}
