//! What the pages receive from server functions. Compiled for the server and the browser;
//! separate from the database row types on purpose. Numbers are i64, never usize.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EnvironmentView {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenView {
    pub id: String,
    pub prefix: String,
    pub label: String,
    pub created_at: i64,
    pub revoked: bool,
}

/// One node's report for one pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodePipelineView {
    pub pipeline_id: String,
    pub pipeline_name: String,
    pub version: Option<i64>,
    pub status: String,
    pub events_in: i64,
    pub errors_total: i64,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeView {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub labels: Labels,
    pub operator_labels: Labels,
    pub status: vf_rules::NodeStatus,
    pub agent_version: Option<String>,
    /// How long ago the node last spoke, as of `FleetView::now`; None if never.
    pub last_seen_age_ms: Option<i64>,
    pub pipelines: Vec<NodePipelineView>,
}

/// One node's page (`node.get`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeDetailView {
    pub now: i64,
    pub node: NodeView,
    pub environment_id: String,
    pub hostname: String,
    pub os: Option<String>,
    pub vector_version: Option<String>,
    pub enrolled_at: i64,
    pub last_seen_at: Option<i64>,
    pub revoked: bool,
    /// What the agent last reported of its host, as `(field path, value)` pairs.
    pub host_metrics: Vec<(String, String)>,
    /// What the agent last said of itself (`agentHealth`, `deploymentMode`, ...), likewise.
    pub agent_health: Vec<(String, String)>,
    /// The node's newest log lines, oldest first: `(pipeline name, unix ms, line)`.
    pub logs: Vec<(String, i64, String)>,
    /// Per pipeline id, the components of the version the node runs (what can be sampled
    /// or tapped).
    pub components: BTreeMap<String, Vec<vf_rules::config::Component>>,
    /// Whether the node can be asked for samples, taps and restarts (a vf-agent, not revoked).
    pub live: bool,
    /// Per pipeline id, its latest report's `componentMetrics` as `(path, value)` pairs.
    pub component_metrics: BTreeMap<String, Vec<(String, String)>>,
    /// What happened to the node, newest first (its audit entries): `(unix ms, actor, action)`.
    pub history: Vec<(i64, String, String)>,
}

/// The answers to one sample request so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampleView {
    pub results: Vec<SampleResultView>,
    pub now: i64,
    /// When the request stops waiting: past it with no answer, the page says so.
    pub expires_at: i64,
}

/// One component's answer: its events (each as indented JSON), the fields they showed, or
/// why there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampleResultView {
    pub component_key: String,
    pub events: Vec<String>,
    /// `(path, type, example value)`.
    pub schema: Vec<(String, String, String)>,
    pub error: Option<String>,
}

/// A live tap's entries after the ones already shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TapView {
    /// `(entry id, unix ms, the event as JSON)`, oldest first.
    pub events: Vec<(i64, i64, String)>,
    /// How the tap ended, when the agent said it did (`stopped: by the operator`).
    pub ended: Option<String>,
    /// The newest entry read: the `after` of the next read.
    pub last: i64,
}

/// A JSON document as readable `(path, value)` pairs, nested objects joined with dots
/// (`memory.used_bytes`), `null`s left out, arrays and strings written as they are.
pub fn flatten_json(value: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Null => {}
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&path, v, out);
                }
            }
            serde_json::Value::String(s) => out.push((prefix.to_owned(), s.clone())),
            other => out.push((prefix.to_owned(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}

/// One page of an environment's nodes (`fleet.nodes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FleetView {
    pub now: i64,
    /// Live nodes in the environment.
    pub total: i64,
    /// How many of them are in each status, every status listed.
    pub by_status: Vec<(vf_rules::NodeStatus, i64)>,
    /// Nodes the filter admits; `nodes` is the page of them from `offset`.
    pub matched: i64,
    pub offset: i64,
    pub limit: i64,
    pub nodes: Vec<NodeView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupView {
    pub id: String,
    pub name: String,
    pub criteria: Labels,
    /// How many nodes match every criterion right now.
    pub matching_count: i64,
    /// The first of them by name (at most 20).
    pub matching_sample: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PipelineSummary {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub node_selector: Labels,
    pub deployed_version: Option<i64>,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VersionView {
    pub version: i64,
    pub checksum: String,
    pub changelog: String,
    pub author: String,
    pub created_at: i64,
}

/// What one node of the environment gets of this pipeline, and what it reports running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PipelineNodeView {
    pub node_id: String,
    pub node_name: String,
    pub labels: Labels,
    /// Whether the pipeline's nodeSelector admits the node (the release fleet).
    pub admitted: bool,
    pub node_status: vf_rules::NodeStatus,
    pub served: vf_rules::ServedKind,
    pub served_version: Option<i64>,
    pub running_version: Option<i64>,
    pub process_status: Option<String>,
    pub events_in: i64,
    pub errors_total: i64,
    /// The stage (1-based) of the pipeline's latest release that added the node; None when
    /// no stage did (not targeted, or no release).
    pub stage: Option<i64>,
}

/// Counts over a set of nodes, for summaries that never list the nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeCounts {
    pub total: i64,
    /// By agent status, every status listed.
    pub by_status: Vec<(vf_rules::NodeStatus, i64)>,
    /// By the process status the nodes report for the pipeline (`None`: nothing reported).
    pub by_process: Vec<(Option<String>, i64)>,
    /// By the version the nodes report running (`None`: none).
    pub by_running: Vec<(Option<i64>, i64)>,
}

/// Which of a pipeline's nodes to list (`pipeline.nodes`, `nodes` of `pipeline.get`):
/// `name`, `label` and `status` filter as in `fleet.nodes`; `stage` is a stage number of the
/// latest release (the nodes it added) or `none` (nodes no stage targeted); `offset` and
/// `limit` (default 50, at most 500) cut the page.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodesQuery {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub status: Option<vf_rules::NodeStatus>,
    #[serde(default)]
    pub stage: Option<String>,
    #[serde(default)]
    pub offset: Option<i64>,
    #[serde(default)]
    pub limit: Option<i64>,
}

/// One page of a pipeline's nodes (`pipeline.nodes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PipelineNodesPage {
    /// The nodes the pipeline's nodeSelector admits.
    pub total: i64,
    pub matched: i64,
    pub offset: i64,
    pub limit: i64,
    pub nodes: Vec<PipelineNodeView>,
}

/// A page of the node ids one stage of a release added (`release.stage.nodes`), in the
/// order selection picked them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageNodesPage {
    pub total: i64,
    pub offset: i64,
    pub limit: i64,
    pub node_ids: Vec<String>,
}

/// The nodes of the latest release not targeted by any stage yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WaitingNodes {
    pub count: i64,
    /// The first few, by name: `(node id, name, the version it is served)` (None: withheld).
    pub sample: Vec<(String, String, Option<i64>)>,
}

/// The newest log lines of one canary node for the pipeline, for the rollout view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CanaryLogs {
    pub node_id: String,
    pub node_name: String,
    /// The stage (1-based) that targeted it.
    pub stage: i64,
    /// `(unix ms, line, is an error)`: error lines first, then the rest, each oldest first.
    pub lines: Vec<(i64, String, bool)>,
    pub errors: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PipelineDetail {
    pub pipeline: PipelineSummary,
    pub environment: EnvironmentView,
    pub versions: Vec<VersionView>,
    /// The deployed version's config body, to prefill the deploy form.
    pub deployed_config: Option<String>,
    /// The nodes the pipeline's nodeSelector admits (the release fleet), counted.
    pub admitted: NodeCounts,
    /// Nodes of the environment the nodeSelector keeps out.
    pub excluded: i64,
    /// The latest release's nodes no stage has targeted yet.
    pub waiting: WaitingNodes,
    /// While a release is in flight, the newest log lines of its canary nodes (those with
    /// error lines first; at most 10 nodes).
    pub canary_logs: Vec<CanaryLogs>,
    /// The environment's node groups (stage selectors may name them).
    pub groups: Vec<GroupView>,
    /// Whether customPromQL gates can be offered (VF_PROMETHEUS_URL is set).
    pub prometheus_configured: bool,
    /// The pipeline's latest release, in flight or not.
    pub release: Option<ReleaseView>,
    /// The page of nodes asked for with `nodes` (as `pipeline.nodes` returns it), read with
    /// the counts above; absent when not asked for.
    pub nodes: Option<PipelineNodesPage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiffLineView {
    pub op: String,
    pub text: String,
}

/// A diff between two versions, with every version number to choose from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiffView {
    pub from: i64,
    pub to: i64,
    /// Newest first.
    pub versions: Vec<i64>,
    pub lines: Vec<DiffLineView>,
}

/// A release with the per-stage series of its canary nodes, for the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseHistoryItem {
    pub release: ReleaseView,
    pub series: Vec<StageSeries>,
}

/// One evaluation of a stage's gates with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvaluationView {
    pub at: i64,
    pub trigger: vf_rules::Trigger,
    pub actor: String,
    pub results: Vec<vf_rules::GateResult>,
    pub decision: vf_rules::DecisionKind,
}

/// A started stage of a release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageView {
    /// 0-based; pages show it 1-based.
    pub index: i64,
    /// How many nodes this stage added when it started (`release.stage.nodes` lists them).
    pub node_count: i64,
    /// Those nodes counted by status (filled by `pipeline.get`; empty elsewhere).
    #[serde(default)]
    pub counts: NodeCounts,
    pub started_at: i64,
    pub bake_deadline: i64,
    pub evaluations: Vec<EvaluationView>,
    /// None while baking.
    pub outcome: Option<vf_rules::StageOutcome>,
    /// The checks of each signal gate during the bake: the last one in full and a short
    /// series, for the live value and the sparkline.
    #[serde(default)]
    pub checks: Vec<vf_rules::GateChecks>,
    /// Operator actions refused while this stage was current (not gate evidence).
    #[serde(default)]
    pub refused: Vec<vf_rules::RefusedAttempt>,
}

/// A release as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseView {
    pub id: String,
    pub pipeline_id: String,
    pub canary_version: i64,
    pub previous_version: Option<i64>,
    /// `CANARY_DEPLOYED`, `HEALTH_CHECK`, `BROADENED`, `ROLLED_BACK`; null only when the
    /// stored status itself is unreadable.
    pub status: Option<vf_rules::ReleaseStatus>,
    /// Set when the stored state does not parse: which release and field, and why. The
    /// other state fields are then empty; fencing serves the previous version.
    pub unreadable: Option<String>,
    pub planless: bool,
    /// The plan in its canonical JSON form; null when unreadable.
    pub plan: Option<vf_rules::RolloutPlan>,
    pub stage_count: i64,
    pub current_stage: i64,
    pub stages: Vec<StageView>,
    pub bake_deadline: Option<i64>,
    pub baseline_eps: Option<f64>,
    pub hold_reason: Option<String>,
    pub failure_reason: Option<String>,
    pub created_by: String,
    pub updated_by: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub completed_at: Option<i64>,
    pub row_version: i64,
    /// What the buttons may offer now, in button order: `advance`, `complete`, `broaden`,
    /// `rollback`.
    pub allowed_actions: Vec<vf_rules::Action>,
    /// Server time when this was read, for countdowns.
    pub now: i64,
    /// Set while an operator has paused the release.
    #[serde(default)]
    pub paused: Option<vf_rules::Pause>,
    /// The reasons operators gave for their actions, oldest first.
    #[serde(default)]
    pub notes: Vec<vf_rules::Note>,
}

impl ReleaseView {
    /// Delivery is fenced (an unreadable release with an in-flight status still is).
    pub fn in_flight(&self) -> bool {
        self.status.is_some_and(|s| s.in_flight())
    }

    /// A stage is baking: its deadline counts down (not while paused).
    pub fn baking(&self) -> bool {
        self.unreadable.is_none()
            && self.status.is_some_and(|s| s.baking())
            && self.paused.is_none()
    }
}

/// Events and errors per minute of a release's canary nodes during one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageSeries {
    pub index: i64,
    /// (minute start in unix ms, events in, errors)
    pub points: Vec<(i64, i64, i64)>,
}

/// The charts of one release: which release, and each opened stage's series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseCharts {
    pub release_id: String,
    pub stages: Vec<StageSeries>,
}

/// A rolling rollout as the admin page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RollingView {
    pub name: String,
    pub global: vf_rolling::RolloutEntry,
    pub orgs: Vec<(String, vf_rolling::RolloutEntry)>,
    pub retired_at: Option<i64>,
    pub row_version: i64,
    pub updated_at: i64,
}

/// One audited change of a rolling rollout, read from its audit event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RollingChange {
    pub at: i64,
    pub actor: String,
    /// The audit action: `rollout.percent`, `rollout.org.percent`, `rollout.org.remove` or
    /// `rollout.delete`.
    pub action: String,
    pub rollout: String,
    /// The org of an override change.
    pub org: Option<String>,
    /// The percent before (`None`: the override did not exist) and after (`None`: removed).
    pub before: Option<u8>,
    pub after: Option<u8>,
    /// The change created the rollout.
    pub created: bool,
    /// Why, as the operator said when saving.
    pub comment: Option<String>,
}

/// Everything the edge-config admin page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EdgeAdminView {
    pub rollouts: Vec<RollingView>,
    /// The published document's version (its ETag) and when it last changed.
    pub version: i64,
    pub generated_at: i64,
    pub history: Vec<RollingChange>,
    pub now: i64,
}

/// "20% -> 35%: buckets 20..34 switch to the new path": what a percent change does.
pub fn preview_change(old: u8, new: u8) -> String {
    let (old, new) = (old.min(100), new.min(100));
    match old.cmp(&new) {
        std::cmp::Ordering::Equal => format!("{old}% -> {new}%: nobody moves"),
        std::cmp::Ordering::Less => format!(
            "{old}% -> {new}%: buckets {old}..{} switch to the new path",
            new - 1
        ),
        std::cmp::Ordering::Greater => format!(
            "{old}% -> {new}%: buckets {new}..{} go back to the old path",
            old - 1
        ),
    }
}

/// Parses `k=v, k2=v2` (commas or new lines) into labels; the message says what is wrong.
pub fn parse_label_text(text: &str) -> Result<Labels, String> {
    let mut out = Labels::new();
    for part in text
        .split([',', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let Some((k, v)) = part.split_once('=') else {
            return Err(format!("\"{part}\" is not key=value"));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(format!("\"{part}\" has an empty key"));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// `k=v, k2=v2`, the inverse of [`parse_label_text`].
pub fn label_text(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `1 node`, `3 nodes`.
pub fn plural(n: i64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// A unix-ms time as `YYYY-MM-DD HH:MM:SS UTC` (the same on server and browser).
pub fn format_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// `4s ago`, `3m ago`, `2h ago`, `5d ago`.
pub fn format_age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_text_round_trips_and_names_a_bad_pair() {
        let l = parse_label_text("tier=edge, zone = z1\nrollout-wave=a").unwrap();
        assert_eq!(label_text(&l), "rollout-wave=a, tier=edge, zone=z1");
        assert_eq!(
            parse_label_text("tier").unwrap_err(),
            "\"tier\" is not key=value"
        );
        assert!(parse_label_text("  ").unwrap().is_empty());
    }

    #[test]
    fn a_percent_preview_names_the_buckets_that_move() {
        assert_eq!(
            preview_change(20, 35),
            "20% -> 35%: buckets 20..34 switch to the new path"
        );
        assert_eq!(
            preview_change(50, 20),
            "50% -> 20%: buckets 20..49 go back to the old path"
        );
        assert_eq!(preview_change(30, 30), "30% -> 30%: nobody moves");
        assert_eq!(
            preview_change(0, 100),
            "0% -> 100%: buckets 0..99 switch to the new path"
        );
    }

    #[test]
    fn times_format_as_utc() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_time(1_700_000_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(format_age(4_000), "4s ago");
        assert_eq!(format_age(180_000), "3m ago");
    }
}

#[cfg(test)]
mod flatten_tests {
    use super::flatten_json;

    #[test]
    fn nested_fields_read_as_dotted_paths_without_nulls() {
        let v = serde_json::json!({"agentHealth": {"pushConnected": true, "pollErrorsTotal": 2},
            "runningAs": "vector", "updateError": null, "disks": [1, 2]});
        assert_eq!(
            flatten_json(&v),
            vec![
                ("agentHealth.pollErrorsTotal".to_string(), "2".to_string()),
                ("agentHealth.pushConnected".to_string(), "true".to_string()),
                ("disks".to_string(), "[1,2]".to_string()),
                ("runningAs".to_string(), "vector".to_string()),
            ]
        );
    }
}

/// A registered webhook (its secret is never shown again after creation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    /// Sends a Slack-compatible `{"text": ...}` body instead of the event JSON.
    pub slack: bool,
    pub created_by: String,
    pub created_at: i64,
}

/// A webhook just created, with its secret: shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CreatedWebhook {
    pub webhook: WebhookView,
    pub secret: String,
}

/// One delivery of a webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeliveryView {
    pub id: String,
    pub event: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    pub attempts: i64,
    pub created_at: i64,
    pub next_attempt_at: Option<i64>,
    pub last_attempt_at: Option<i64>,
    pub response_code: Option<i64>,
    pub latency_ms: Option<i64>,
    pub error: Option<String>,
}
