//! The deploy dialog: direct deploy, plan-less canary, or a progressive rollout plan.
//!
//! Its state is plain data in signals (`plan_model`, `canary_model`), checked by `vf_rules`
//! on every change (`field_errors`) and previewed by the server with `vf_rules` selection
//! (`crate::preview`, `release.preview`). The views only bind controls to edits of that data.

use crate::components::Loads;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api::error_text;
use crate::api::pipelines::DeployPipeline;
use crate::api::releases::{new_release_id, preview_release, CreateCanary};
use crate::components::ErrorBox;
use crate::preview::{GroupRef, PreviewView, StagePreview};
use crate::types::{plural, PipelineDetail};
use vf_rules::Unparsed;

mod canary_fields;
mod canary_model;
mod config_editor;
mod field_errors;
mod focus;
mod gates_editor;
mod mode;
mod plan_editor;
mod plan_model;
mod preview_view;
mod selector_fields;
mod stage_editor;

use canary_fields::CanaryFields;
use canary_model::{CanaryDraft, CanaryRequestParts};
use config_editor::ConfigEditor;
use field_errors::{CheckedPlan, FieldErrors};
use mode::{Mode, ModeChoice};
use plan_editor::PlanEditor;
use plan_model::PlanDraft;

/// What the dialog needs from the pipeline besides the preview, without the counters that
/// change every poll, so it only changes when the groups, the fleet's size or the Prometheus
/// setting do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeployContext {
    pub groups: Vec<GroupRef>,
    pub prometheus: bool,
    /// Admitted and excluded node counts: the preview is asked again when they change.
    pub fleet: (i64, i64),
}

impl DeployContext {
    pub fn from_detail(d: &PipelineDetail) -> DeployContext {
        DeployContext {
            groups: (d.groups.iter())
                .map(|g| GroupRef {
                    id: g.id.clone(),
                    name: g.name.clone(),
                    criteria: g.criteria.clone(),
                })
                .collect(),
            prometheus: d.prometheus_configured,
            fleet: (d.admitted.total, d.excluded),
        }
    }
}

/// The server's preview of the release being drafted; an error says why there is none.
pub type Preview = Option<Result<PreviewView, String>>;

/// The release id the preview ranks with and create is given, reserved when the dialog
/// mounts (and again after a release is created with it).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ReleaseId {
    Loading,
    Ready(String),
    Failed(String),
}

fn reserve_release_id(slot: RwSignal<ReleaseId>) {
    slot.set(ReleaseId::Loading);
    spawn_local(async move {
        slot.set(match new_release_id().await {
            Ok(id) => ReleaseId::Ready(id),
            Err(e) => ReleaseId::Failed(error_text(&e)),
        });
    });
}

/// The deploy dialog of a pipeline. `deploy` is the page's direct-deploy action (the page
/// refreshes on it); canaries and rollouts go through this dialog's own `release.canary.create`
/// action, after which `detail` is refetched so the page shows the release.
#[component]
pub fn DeployForm(
    id: Memo<String>,
    deploy: ServerAction<DeployPipeline>,
    detail: Loads<PipelineDetail>,
) -> impl IntoView {
    let create = ServerAction::<CreateCanary>::new();
    // A staged rollout by default: deploying to everyone at once is a deliberate choice.
    let mode = RwSignal::new(Mode::Progressive);
    let config = RwSignal::new(String::new());
    let changelog = RwSignal::new(String::new());
    let touched = RwSignal::new(false);
    let plan = RwSignal::new(PlanDraft::default());
    let canary = RwSignal::new(CanaryDraft::default());
    let context = RwSignal::new(None::<DeployContext>);
    let release_id = RwSignal::new(ReleaseId::Loading);
    let submitted = RwSignal::new(None::<Mode>);
    // The canary version of a release in flight: the dialog gives way to a notice linking the
    // rollout, and starts afresh once the release completes or is rolled back.
    let in_flight = RwSignal::new(None::<i64>);
    // Offered once the server refused because the environment is frozen: an admin may go
    // through the freeze, giving a reason.
    let override_freeze = RwSignal::new(false);

    // Effects run only in the browser, after hydration, so server and client render the
    // same markup; the dialog then fills in from the page's detail resource.
    Effect::new(move |_| {
        let Some(Ok(d)) = detail.get() else { return };
        if !touched.get_untracked() {
            if let Some(c) = d.deployed_config.clone() {
                config.set(c);
            }
        }
        let next = Some(DeployContext::from_detail(&d));
        if context.with_untracked(|c| *c != next) {
            context.set(next);
        }
        let flying = (d.release.as_ref())
            .filter(|r| r.in_flight())
            .map(|r| r.canary_version);
        if in_flight.get_untracked() != flying {
            in_flight.set(flying);
        }
    });
    Effect::watch(
        move || in_flight.get(),
        move |now, before, _| {
            if now.is_none() && before.is_some_and(Option::is_some) {
                touched.set(false);
                changelog.set(String::new());
                plan.set(PlanDraft::default());
                canary.set(CanaryDraft::default());
                submitted.set(None);
                detail.refetch();
            }
        },
        false,
    );
    Effect::new(move |_| reserve_release_id(release_id));
    Effect::watch(
        move || deploy.version().get(),
        move |_, _, _| {
            if matches!(deploy.value().get_untracked(), Some(Ok(_))) {
                touched.set(false);
            }
        },
        false,
    );
    Effect::watch(
        move || create.version().get(),
        move |_, _, _| {
            if matches!(create.value().get_untracked(), Some(Ok(_))) {
                // That id now names a release; the next one needs its own.
                reserve_release_id(release_id);
                detail.refetch();
            }
        },
        false,
    );

    let prometheus = Memo::new(move |_| context.with(|c| c.as_ref().is_some_and(|c| c.prometheus)));
    let checked_plan = Memo::new(move |_| plan.with(|p| CheckedPlan::new(p, prometheus.get())));
    let canary_parts = Memo::new(move |_| canary.with(CanaryDraft::request));
    let canary_errors =
        Memo::new(move |_| canary_parts.with(|c| FieldErrors::new(c.errors.clone())));
    // Asked again whenever the draft's selectors, the release id or the fleet change; only
    // the answer to the latest question is kept.
    let preview = RwSignal::new(None::<Result<PreviewView, String>>);
    let asked = StoredValue::new(0u64);
    Effect::new(move |_| {
        let selectors = match mode.get() {
            Mode::Direct => return,
            Mode::Canary => vec![canary_parts.with(|c| c.selector.clone())],
            Mode::Progressive => checked_plan.with(CheckedPlan::selectors),
        };
        let release = match release_id.get() {
            ReleaseId::Ready(id) => id,
            // Without a reserved id the server picks one; ranking is then unknown.
            ReleaseId::Failed(_) => String::new(),
            ReleaseId::Loading => return,
        };
        if context.with(Option::is_none) {
            return;
        }
        let pipeline = id.get();
        asked.update_value(|n| *n += 1);
        let question = asked.get_value();
        spawn_local(async move {
            let selectors = selectors.into_iter().map(Unparsed::new).collect();
            let answer = preview_release(pipeline, release, selectors).await;
            if asked.get_value() == question {
                preview.set(Some(answer.map_err(|e| error_text(&e))));
            }
        });
    });
    let previews = Memo::new(move |_| {
        preview.with(|p| {
            p.as_ref()
                .and_then(|r| r.as_ref().ok())
                .map(|p| p.stages.clone())
        })
    });

    let empty = Memo::new(move |_| config.with(|c| c.trim().is_empty()));
    let blocked = Memo::new(move |_| {
        let pending = deploy.pending().get() || create.pending().get();
        let invalid = match mode.get() {
            Mode::Direct => false,
            Mode::Canary => !canary_errors.with(FieldErrors::is_empty),
            Mode::Progressive => !checked_plan.with(|c| c.errors.is_empty()),
        };
        let reserving = mode.get() != Mode::Direct && release_id.get() == ReleaseId::Loading;
        empty.get() || pending || invalid || reserving
    });

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if blocked.get_untracked() {
            return;
        }
        let m = mode.get_untracked();
        let overriding = override_freeze.get_untracked();
        let override_reason = if overriding {
            match crate::components::reason_prompt("Why go through the freeze? (required)") {
                Some(Some(reason)) => Some(reason),
                _ => return,
            }
        } else {
            None
        };
        if m == Mode::Direct {
            let nodes = context.with_untracked(|c| c.as_ref().map_or(0, |c| c.fleet.0));
            let question = format!(
                "Deploy this config to all {} at once, without a canary?",
                plural(nodes, "node")
            );
            if !crate::components::confirmed(&question) {
                return;
            }
            let reason = match override_reason {
                Some(reason) => Some(reason),
                None => match crate::components::reason_prompt("Reason (optional):") {
                    Some(reason) => reason,
                    None => return,
                },
            };
            submitted.set(Some(m));
            deploy.dispatch(DeployPipeline {
                pipeline_id: id.get_untracked(),
                config_yaml: config.get_untracked(),
                changelog: changelog.get_untracked(),
                reason,
                override_freeze: overriding,
            });
            return;
        }
        submitted.set(Some(m));
        let CanaryRequestParts {
            selector,
            window_minutes,
            ..
        } = canary_parts.get_untracked();
        let progressive = m == Mode::Progressive;
        create.dispatch(CreateCanary {
            pipeline_id: id.get_untracked(),
            config_yaml: config.get_untracked(),
            changelog: changelog.get_untracked(),
            rollout_plan: progressive
                .then(|| Unparsed::new(checked_plan.with_untracked(|c| c.json.clone()))),
            canary_selector: (!progressive).then(|| Unparsed::new(selector)),
            health_check_window_minutes: if progressive { None } else { window_minutes },
            release_id: match release_id.get_untracked() {
                ReleaseId::Ready(id) => Some(id),
                _ => None,
            },
            override_freeze: overriding,
            reason: override_reason,
        });
    };

    let outcome = move || match submitted.get()? {
        Mode::Direct => deploy.value().get().map(|r| match r {
            Ok(v) => view! { <p class="ok" role="status">{format!("Deployed v{}", v.version)}</p> }
                .into_any(),
            Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
        }),
        m => create.value().get().map(|r| match r {
            Ok(_) => view! { <p class="ok" role="status">{m.started_text()}</p> }.into_any(),
            Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
        }),
    };

    // The server's refusal names a freeze an admin may override.
    let frozen = move || {
        let refused = |e: &ServerFnError| error_text(e).contains("may override with a reason");
        let deploy_refused = deploy
            .value()
            .with(|v| matches!(v, Some(Err(e)) if refused(e)));
        let create_refused = create
            .value()
            .with(|v| matches!(v, Some(Err(e)) if refused(e)));
        deploy_refused || create_refused || override_freeze.get()
    };

    let notice = move || {
        let version = in_flight.get().unwrap_or_default();
        view! {
            <section class="card deploy-dialog" aria-label="Deploy" data-testid="deploy-locked">
                <h2>"Deploy"</h2>
                <p>
                    {format!("A rollout of v{version} is in flight. ")}
                    <a href="#rollout">"See the rollout"</a>
                    "; a new deploy or rollout can start once it completes or is rolled back."
                </p>
            </section>
        }
    };
    view! {
        <Show when=move || in_flight.get().is_none() fallback=notice>
        <form class="card form deploy-dialog" aria-label="Deploy" novalidate on:submit=submit
            on:keydown=never_submit_on_enter>
            <h2>"Deploy"</h2>
            <ModeChoice mode/>
            <ConfigEditor config touched/>
            {move || (empty.get() && touched.get()).then(|| view! { <p class="field-error" id="config-error">"Config (YAML): must not be empty"</p> })}
            <label>"Changelog" <input name="changelog" bind:value=changelog placeholder="What changed and why"/></label>
            {move || match mode.get() {
                Mode::Direct => ().into_any(),
                Mode::Canary => view! { <CanaryFields canary errors=canary_errors previews preview/> }.into_any(),
                Mode::Progressive => view! { <PlanEditor plan checked=checked_plan previews preview context/> }.into_any(),
            }}
            {move || match release_id.get() {
                ReleaseId::Failed(message) if mode.get() != Mode::Direct => Some(view! {
                    <p class="hint">{format!("Could not reserve a release id ({message}); the preview of percentage stages may differ from what the server picks.")}</p>
                }),
                _ => None,
            }}
            {move || frozen().then(|| view! {
                <label class="check" data-testid="override-freeze">
                    <input type="checkbox" bind:checked=override_freeze/>
                    " Override the freeze (admins; you will be asked for a reason)"
                </label>
            })}
            <div class="submit-row">
                <button type="submit" class="primary" disabled=move || blocked.get()>{move || mode.get().submit_text()}</button>
                {move || (create.pending().get() || deploy.pending().get()).then(|| view! { <span class="muted">"Working..."</span> })}
            </div>
            <div class="deploy-outcome" aria-live="polite">{outcome}</div>
        </form>
        </Show>
    }
}

/// Enter in a field of the dialog never submits it: a release starts only from its button
/// (Enter on a focused button still presses it, and Enter in the config makes a new line).
fn never_submit_on_enter(ev: leptos::ev::KeyboardEvent) {
    if ev.key() != "Enter" {
        return;
    }
    let tag = event_target::<leptos::web_sys::Element>(&ev).tag_name();
    if matches!(tag.as_str(), "INPUT" | "SELECT") {
        ev.prevent_default();
    }
}

/// The preview of one stage (0-based) once the fleet and release id are known.
fn stage_preview(previews: Memo<Option<Vec<StagePreview>>>, index: usize) -> Option<StagePreview> {
    previews.with(|p| p.as_ref().and_then(|p| p.get(index).cloned()))
}
