//! The rollout view: the pipeline's release, stage by stage, with each stage's nodes counted
//! by status (the nodes table below lists them), its gate results and evidence, the bake countdown, the nodes not targeted yet, and the
//! operator buttons the release's state allows.

mod checks;
mod countdown;
mod gates;

use crate::components::Loads;
use leptos::prelude::*;

use super::chart::{error_limit, StageChart};
use super::nodes::NodesShown;
use crate::api::error_text;
use crate::api::releases::{
    AdvanceRelease, BroadenRelease, CompleteRelease, PauseRelease, ResumeRelease, RollbackRelease,
};
use crate::components::{ErrorBox, Loaded, Status, StatusBadge};
use crate::types::{
    plural, CanaryLogs, DiffView, NodeCounts, PipelineDetail, ReleaseCharts, ReleaseView,
    WaitingNodes,
};
use checks::{LiveChecks, RefusedAttempts};
use countdown::{format_remaining, timing_text, Countdown};
pub use gates::GateEvaluations;

/// The operator actions, created once per page so their results survive refreshes.
#[derive(Clone, Copy)]
pub struct RolloutActions {
    pub advance: ServerAction<AdvanceRelease>,
    pub complete: ServerAction<CompleteRelease>,
    pub broaden: ServerAction<BroadenRelease>,
    pub rollback: ServerAction<RollbackRelease>,
    pub pause: ServerAction<PauseRelease>,
    pub resume: ServerAction<ResumeRelease>,
}

impl RolloutActions {
    pub fn new() -> Self {
        Self {
            advance: ServerAction::new(),
            complete: ServerAction::new(),
            broaden: ServerAction::new(),
            rollback: ServerAction::new(),
            pause: ServerAction::new(),
            resume: ServerAction::new(),
        }
    }

    /// Bumps whenever any action finished, so the page refetches.
    pub fn version(&self) -> usize {
        self.advance.version().get()
            + self.complete.version().get()
            + self.broaden.version().get()
            + self.rollback.version().get()
            + self.pause.version().get()
            + self.resume.version().get()
    }

    fn pending(&self) -> bool {
        self.advance.pending().get()
            || self.complete.pending().get()
            || self.broaden.pending().get()
            || self.rollback.pending().get()
            || self.pause.pending().get()
            || self.resume.pending().get()
    }

    /// The latest refusal or error of any action.
    fn error(&self) -> Option<String> {
        let err = |r: Option<Result<ReleaseView, ServerFnError>>| r.and_then(|r| r.err());
        err(self.advance.value().get())
            .or_else(|| err(self.complete.value().get()))
            .or_else(|| err(self.broaden.value().get()))
            .or_else(|| err(self.rollback.value().get()))
            .or_else(|| err(self.pause.value().get()))
            .or_else(|| err(self.resume.value().get()))
            .map(|e| error_text(&e))
    }
}

impl Default for RolloutActions {
    fn default() -> Self {
        Self::new()
    }
}

/// How a stage of the plan stands, as the rollout view and the history show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageStanding {
    Pending,
    Baking,
    Passed,
    Failed,
    Held,
    RolledBack,
    NotOpened,
}

impl StageStanding {
    /// The `data-state` value and the words shown.
    pub fn as_str(self) -> &'static str {
        match self {
            StageStanding::Pending => "pending",
            StageStanding::Baking => "baking",
            StageStanding::Passed => "passed",
            StageStanding::Failed => "failed",
            StageStanding::Held => "held",
            StageStanding::RolledBack => "rolled back",
            StageStanding::NotOpened => "not opened",
        }
    }

    /// The badge: `ROLLED_BACK`, `BAKING`, ...
    pub fn badge(self) -> String {
        self.as_str().to_uppercase().replace(' ', "_")
    }
}

/// How stage `index` of the plan stands: its outcome once decided, else what the release's
/// status says of the current stage.
pub fn stage_state(r: &ReleaseView, index: usize) -> StageStanding {
    use vf_rules::{ReleaseStatus as S, StageOutcome as O};
    let status = r.status.unwrap_or(S::RolledBack);
    match r.stages.get(index) {
        None if status.in_flight() => StageStanding::Pending,
        None => StageStanding::NotOpened,
        Some(s) => match (s.outcome, status) {
            (Some(O::Passed), _) => StageStanding::Passed,
            (Some(O::Failed), _) => StageStanding::Failed,
            (Some(O::Held), _) => StageStanding::Held,
            (None, S::CanaryDeployed) => StageStanding::Baking,
            (None, S::HealthCheck) => StageStanding::Held,
            (None, S::RolledBack) => StageStanding::RolledBack,
            (None, S::Broadened) => StageStanding::Passed,
        },
    }
}

/// A one-line description of stage `index`'s selector.
pub fn selector_text(plan: Option<&vf_rules::RolloutPlan>, index: usize) -> String {
    plan.and_then(|p| p.stage(index))
        .map(|s| s.selector.describe())
        .unwrap_or_else(|| "selector".into())
}

#[component]
pub fn RolloutView(
    d: PipelineDetail,
    actions: RolloutActions,
    shown: RwSignal<NodesShown>,
    /// What the release changes (created with the page, so hydration agrees on it).
    diff: Loads<Option<DiffView>>,
    /// The latest release's per-stage series (created with the page, like `diff`).
    series: Loads<Option<ReleaseCharts>>,
) -> impl IntoView {
    let Some(r) = d.release.clone() else {
        return view! { <p class="empty">"No release yet. Start a canary or a progressive rollout from the deploy dialog below."</p> }.into_any();
    };
    let in_flight = r.in_flight();
    let waiting = d.waiting.clone();
    let release_id = r.id.clone();
    // A version deployed directly after the release ended supersedes it: say so, rather
    // than let the card read as what the fleet runs.
    let superseded = (!in_flight)
        .then_some(d.pipeline.deployed_version)
        .flatten()
        .filter(|v| *v != r.canary_version)
        .and_then(|v| d.versions.iter().find(|x| x.version == v))
        .filter(|x| r.completed_at.is_some_and(|done| x.created_at > done))
        .map(|x| {
            format!(
                "Since this release, v{} was deployed directly by {} at {}.",
                x.version,
                x.author,
                crate::types::format_time(x.created_at)
            )
        });
    let title = match (in_flight, superseded.is_some()) {
        (true, _) => "Rollout in flight",
        (false, false) => "Latest release",
        (false, true) => "Latest release (superseded)",
    };
    view! {
        <section class="card rollout" id="rollout" aria-label="Rollout" data-testid="rollout" data-status=r.status.map(|s| s.as_str())>
            <div class="rollout-head">
                <h2>{title}</h2>
                {r.status.map(|s| {
                    let status = if r.paused.is_some() { Status::paused() } else { s.into() };
                    view! { <StatusBadge status/> }
                })}
                <span class="muted">{format!(
                    "v{} replacing {} - started by {}",
                    r.canary_version,
                    r.previous_version.map(|v| format!("v{v}")).unwrap_or_else(|| "nothing (first deploy)".into()),
                    r.created_by
                )}</span>
                <span class="muted" data-testid="elapsed">{timing_text(
                    r.status,
                    r.paused.is_some(),
                    (r.created_at, r.updated_at, r.completed_at),
                    r.now,
                )}</span>
                {r.baking().then(|| r.bake_deadline.map(|deadline| view! { <Countdown deadline now=r.now/> }))}
            </div>
            {superseded.map(|s| view! { <p class="hint" data-testid="superseded">{s}</p> })}
            {r.unreadable.clone().map(|u| view! { <p class="failure" role="alert" data-testid="state-unreadable">{u}</p> })}
            {r.hold_reason.clone().map(|h| view! { <p class="hold" data-testid="hold-reason">"Held: " {h}</p> })}
            {r.paused.clone().map(|p| view! { <Paused pause=p now=r.now/> })}
            {r.failure_reason.clone().map(|f| view! { <p class="failure" data-testid="failure-reason">"Rolled back: " {f}</p> })}
            <ActionButtons release=r.clone() release_id actions remaining=waiting.count/>
            <Loaded resource=diff hide_loading=true hide_errors=true let:changes>
                {changes.map(|c| view! { <ReleaseDiff c/> })}
            </Loaded>
            <Notes notes=r.notes.clone()/>
            <ol class="stages" data-testid="stages">
                {(0..r.stage_count as usize).map(|i| view! { <StageCard r=r.clone() index=i shown series/> }).collect_view()}
            </ol>
            {in_flight.then(|| view! { <CanaryLogsView logs=d.canary_logs.clone()/> })}
            {in_flight.then(|| view! { <Waiting waiting r=r.clone()/> })}
        </section>
    }
    .into_any()
}

#[component]
fn ActionButtons(
    release: ReleaseView,
    release_id: String,
    actions: RolloutActions,
    /// The nodes no stage has targeted yet: what "Complete all remaining" sends the canary to.
    remaining: i64,
) -> impl IntoView {
    let canary = release.canary_version;
    use vf_rules::Action;
    let id = StoredValue::new(release_id);
    let busy = move || actions.pending();
    // A health window still baking refuses advance and complete: say so instead of offering
    // buttons that can only be refused.
    let left = health_window_left(&release);
    let button = move |action: Action| {
        let waits = left.is_some()
            && matches!(action, Action::Advance | Action::Complete | Action::Broaden);
        let class = match action {
            Action::Advance | Action::Broaden | Action::Resume => "primary",
            Action::Complete | Action::Pause => "",
            Action::Rollback => "danger",
        };
        let run = move |_| {
            use crate::components::{confirmed, reason_prompt};
            let release_id = id.get_value();
            match action {
                Action::Advance => {
                    let reason = None;
                    actions.advance.dispatch(AdvanceRelease { release_id, reason, override_freeze: false });
                }
                Action::Complete => {
                    let question = format!(
                        "Complete all remaining stages now? {} more get v{canary} at once, without their bakes.",
                        plural(remaining, "node")
                    );
                    let reason = if confirmed(&question) {
                        reason_prompt("Reason (optional):")
                    } else {
                        None
                    };
                    if let Some(reason) = reason {
                        actions.complete.dispatch(CompleteRelease { release_id, reason, override_freeze: false });
                    }
                }
                Action::Broaden => {
                    let reason = None;
                    actions.broaden.dispatch(BroadenRelease { release_id, reason, override_freeze: false });
                }
                Action::Pause => {
                    if let Some(reason) = reason_prompt(
                        "Pause this rollout? The bake clock stops until it is resumed. Reason (optional):",
                    ) {
                        actions.pause.dispatch(PauseRelease { release_id, reason });
                    }
                }
                Action::Resume => {
                    let reason = None;
                    actions.resume.dispatch(ResumeRelease { release_id, reason });
                }
                Action::Rollback => {
                    let ok = confirmed(
                        "Roll back this release? Every node returns to the previous config.",
                    );
                    let reason = if ok { reason_prompt("Why roll back? (optional)") } else { None };
                    if let Some(reason) = reason {
                        actions.rollback.dispatch(RollbackRelease { release_id, reason });
                    }
                }
            }
        };
        view! { <button class=class disabled=move || busy() || waits on:click=run>{action.label()}</button> }
    };
    view! {
        <div class="actions" role="group" aria-label="Release actions">
            {release.allowed_actions.iter().copied().map(button).collect_view()}
            {left.map(|ms| view! {
                <span class="muted small" data-testid="health-window-left">
                    {format!("Health window: {} left", format_remaining(ms))}
                </span>
            })}
        </div>
        {move || actions.error().map(|m| view! { <ErrorBox message=m/> })}
    }
}

/// The canary's config against the previous version's, folded under a summary line.
#[component]
fn ReleaseDiff(c: DiffView) -> impl IntoView {
    let added = c.lines.iter().filter(|l| l.op == "+").count() as i64;
    let removed = c.lines.iter().filter(|l| l.op == "-").count() as i64;
    let against = if c.from == 0 {
        "nothing (first deploy)".to_owned()
    } else {
        format!("v{}", c.from)
    };
    view! {
        <details class="release-diff" data-testid="release-diff">
            <summary>{format!(
                "What v{} changes against {against}: {} added, {} removed",
                c.to,
                plural(added, "line"),
                plural(removed, "line")
            )}</summary>
            <pre class="diff">
                {c.lines.into_iter().map(|l| {
                    let class = match l.op.as_str() { "+" => "add", "-" => "del", _ => "same" };
                    view! { <span class=class>{format!("{} {}\n", l.op, l.text)}</span> }
                }).collect_view()}
            </pre>
        </details>
    }
}

/// "Paused by ann for 12 min: reason", and the bake time the pause keeps.
#[component]
fn Paused(pause: vf_rules::Pause, now: i64) -> impl IntoView {
    let minutes = (now - pause.at).max(0) / 60_000;
    let reason = pause.reason.map(|r| format!(": {r}")).unwrap_or_default();
    view! {
        <p class="hold" data-testid="paused">
            {format!("Paused by {} for {minutes} min{reason}", pause.by)}
            {pause.bake_left_ms.map(|left| view! {
                " " <span class="countdown" data-testid="bake-countdown">
                    {format!("bake stopped with {} left", format_remaining(left))}
                </span>
            })}
        </p>
    }
}

/// The reasons operators gave, oldest first.
#[component]
pub fn Notes(notes: Vec<vf_rules::Note>) -> impl IntoView {
    if notes.is_empty() {
        return ().into_any();
    }
    view! {
        <ul class="notes small" data-testid="notes">
            {notes.into_iter().map(|n| view! {
                <li>{format!("{} by {} at {}: {}", n.action.as_str(), n.actor, crate::types::format_time(n.at), n.reason)}</li>
            }).collect_view()}
        </ul>
    }
    .into_any()
}

/// Milliseconds left of the current stage's health window while it bakes; `None` when the
/// stage has no health window or it is over.
fn health_window_left(r: &ReleaseView) -> Option<i64> {
    let stage = r.plan.as_ref()?.stage(r.current_stage as usize)?;
    let has_window = stage.gates.contains(&vf_rules::Gate::HealthWindow);
    let left = r.bake_deadline? - r.now;
    (r.baking() && has_window && left > 0).then_some(left)
}

#[component]
fn StageCard(
    r: ReleaseView,
    index: usize,
    shown: RwSignal<NodesShown>,
    series: Loads<Option<ReleaseCharts>>,
) -> impl IntoView {
    let release_id = r.id.clone();
    let max_error_percent = error_limit(r.plan.as_ref(), index);
    let state = stage_state(&r, index);
    let stage = r.stages.get(index).cloned();
    let planned = r.plan.as_ref().and_then(|p| p.stage(index));
    let bake = planned.map(|s| s.bake.get()).unwrap_or(0);
    let gates: Vec<&str> = planned
        .map(|s| s.gates.iter().map(|g| g.kind()).collect())
        .unwrap_or_default();
    let planned_gates = planned.map(|s| s.gates.clone()).unwrap_or_default();
    let baking = state == StageStanding::Baking;
    let class = format!("stage stage-{}", state.as_str().replace(' ', "-"));
    let number = index as i64 + 1;
    view! {
        <li class=class data-testid=format!("stage-{}", index + 1) data-state=state.as_str()>
            <div class="stage-head">
                <strong>{format!("Stage {}", index + 1)}</strong>
                <StatusBadge status=state.badge()/>
                <span class="muted">{format!("{} - bake {}s - gates: {}", selector_text(r.plan.as_ref(), index), bake,
                    if gates.is_empty() { "none".to_string() } else { gates.join(", ") })}</span>
            </div>
            {stage.clone().map(|s| view! {
                <p class="muted small">
                    {format!("{} added", plural(s.node_count, "node"))}
                    {(s.node_count > 0).then(|| view! {
                        " "
                        <a href="#pipeline-nodes" on:click=move |_| shown.set(NodesShown::of_stage(number))>"Show its nodes"</a>
                    })}
                </p>
                {(s.counts.total > 0).then(|| view! { <StageCounts counts=s.counts.clone()/> })}
                <Loaded resource=series hide_loading=true hide_errors=true let:charts>
                    {charts
                        .filter(|c| c.release_id == release_id)
                        .map(|c| {
                            let points = c.stages.into_iter().find(|x| x.index == index as i64).map(|x| x.points).unwrap_or_default();
                            view! { <StageChart points max_error_percent/> }
                        })}
                </Loaded>
                <LiveChecks gates=planned_gates.clone() checks=s.checks.clone() baking/>
                <GateEvaluations evaluations=s.evaluations.clone()/>
                <RefusedAttempts attempts=s.refused.clone()/>
            })}
        </li>
    }
}

/// A stage's nodes counted by agent status, process status and running version.
#[component]
fn StageCounts(counts: NodeCounts) -> impl IntoView {
    let statuses = counts
        .by_status
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {}", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let processes = counts
        .by_process
        .iter()
        .map(|(s, n)| format!("{n} {}", s.as_deref().unwrap_or("not reported")))
        .collect::<Vec<_>>()
        .join(", ");
    let running = counts
        .by_running
        .iter()
        .map(|(v, n)| match v {
            Some(v) => format!("{n} on v{v}"),
            None => format!("{n} running none"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    view! {
        <dl class="facts small stage-counts" data-testid="stage-counts">
            <dt>"Agents"</dt><dd>{statuses}</dd>
            <dt>"Process"</dt><dd>{processes}</dd>
            <dt>"Running"</dt><dd data-testid="stage-running">{running}</dd>
        </dl>
    }
}

/// The canary nodes' newest log lines for this pipeline, nodes with errors first and each
/// node's error lines first, each node linking to its page.
#[component]
fn CanaryLogsView(logs: Vec<CanaryLogs>) -> impl IntoView {
    if logs.is_empty() {
        return None;
    }
    let erring = logs.iter().filter(|l| l.errors > 0).count() as i64;
    // Open when something went wrong: errors are what an operator looks for here.
    let open = erring > 0;
    let summary = match erring {
        0 => "Canary nodes' logs (no errors)".to_string(),
        n => format!("Canary nodes' logs ({} with errors)", plural(n, "node")),
    };
    Some(view! {
        <details class="canary-logs" data-testid="canary-logs" open=open>
            <summary>{summary}</summary>
            {logs.into_iter().map(|l| view! {
                <div class="canary-log" data-node=l.node_name.clone()>
                    <h4>
                        <a href=format!("/nodes/{}", l.node_id)>{l.node_name.clone()}</a>
                        <span class="muted small">{format!(" stage {} - {}", l.stage, plural(l.errors, "error line"))}</span>
                    </h4>
                    <pre class="logs">
                        {l.lines.into_iter().map(|(at, line, error)| {
                            let mark = if error { "!" } else { " " };
                            format!("{mark} {} {line}\n", crate::types::format_time(at))
                        }).collect::<String>()}
                    </pre>
                </div>
            }).collect_view()}
        </details>
    })
}

#[component]
fn Waiting(waiting: WaitingNodes, r: ReleaseView) -> impl IntoView {
    let held_on = match r.previous_version {
        Some(v) => format!("held on v{v}"),
        None => "withheld (first deploy: the pipeline is not served to them yet)".to_string(),
    };
    let more = waiting.count - waiting.sample.len() as i64;
    view! {
        <div class="waiting" data-testid="not-targeted">
            <h3>{format!("Not targeted yet ({})", waiting.count)}</h3>
            {if waiting.count == 0 {
                view! { <p class="muted">"Every node of the fleet is targeted."</p> }.into_any()
            } else {
                view! {
                    <p class="muted">{format!("These nodes are {held_on} until their stage opens.")}</p>
                    <ul class="chips">
                        {waiting.sample.into_iter().map(|(id, name, served)| {
                            let label = match served { Some(v) => format!("{name} (v{v})"), None => format!("{name} (withheld)") };
                            view! { <li class="chip" data-node=name><a href=format!("/nodes/{id}")>{label}</a></li> }
                        }).collect_view()}
                        {(more > 0).then(|| view! { <li class="chip muted">{format!("and {more} more")}</li> })}
                    </ul>
                }.into_any()
            }}
        </div>
    }
}
