//! The live part of a node's page, per pipeline it runs: "Sample events" asks the node for a
//! few events of every component and shows them with the fields they showed (or "no answer
//! in 30 s"); a live tap streams one component's events until stopped; "Restart" has the
//! node restart the pipeline's process. Answers arrive through the agent's live channel
//! (`docs/agent.md`); this page polls for them once a second.

use leptos::prelude::*;
use leptos::task::spawn_local;
use vf_rules::config::Component;

use crate::api::channel::{
    request_sample, restart_pipeline, sample_results, start_tap, stop_tap, tap_events,
};
use crate::api::error_text;
use crate::components::{confirmed, ErrorBox};
use crate::types::{format_time, SampleView, TapView};

/// Events asked of each component.
const SAMPLE_LIMIT: i64 = 10;
/// Tap events kept on the page (the newest).
const TAP_SHOWN: usize = 200;

/// Where a sample request stands.
#[derive(Debug, Clone, PartialEq)]
enum Sample {
    Idle,
    Waiting,
    /// Answers so far; `done` once every component answered or the request expired.
    Answered {
        view: SampleView,
        done: bool,
    },
    NoAnswer,
    Failed(String),
}

/// What the page shows for the answers so far to a request for `asked` components.
fn sample_state(view: SampleView, asked: usize) -> Sample {
    let expired = view.now > view.expires_at;
    match (view.results.is_empty(), expired) {
        (true, true) => Sample::NoAnswer,
        (true, false) => Sample::Waiting,
        (false, _) => Sample::Answered {
            done: expired || view.results.len() >= asked,
            view,
        },
    }
}

/// A running or ended tap.
#[derive(Debug, Clone, Default, PartialEq)]
struct Tap {
    /// The request id while the tap runs.
    running: Option<String>,
    component: String,
    /// `(entry id, unix ms, event JSON)`, oldest first, the newest [`TAP_SHOWN`].
    events: Vec<(i64, i64, String)>,
    last: i64,
    ended: Option<String>,
    error: Option<String>,
}

impl Tap {
    /// Adds one read of the tap's entries.
    fn take(&mut self, read: TapView) {
        self.events.extend(read.events);
        let over = self.events.len().saturating_sub(TAP_SHOWN);
        self.events.drain(..over);
        self.last = read.last;
        if read.ended.is_some() {
            self.ended = read.ended;
            self.running = None;
        }
    }
}

/// One live panel's state. Owned by the page ([`LiveStates`]), so a sample or tap in progress
/// outlives the page's 5 s refresh, which rebuilds the panels.
#[derive(Clone, Copy)]
pub struct PanelState {
    sample: RwSignal<Sample>,
    tap: RwSignal<Tap>,
    notice: RwSignal<Option<Result<String, String>>>,
}

/// The panels' states by pipeline id, created on first use under the page's owner.
#[derive(Clone, Copy)]
pub struct LiveStates {
    owner: StoredValue<Option<Owner>>,
    panels: StoredValue<std::collections::HashMap<String, PanelState>>,
}

/// Made in the page's body, whose owner then owns every panel's state.
impl Default for LiveStates {
    fn default() -> LiveStates {
        LiveStates {
            owner: StoredValue::new(Owner::current()),
            panels: StoredValue::new(Default::default()),
        }
    }
}

impl LiveStates {
    /// The state of `pipeline_id`'s panel (its tap starts on the first of `components`).
    pub fn of(&self, pipeline_id: &str, components: &[Component]) -> PanelState {
        if let Some(state) = self.panels.with_value(|p| p.get(pipeline_id).copied()) {
            return state;
        }
        let create = || PanelState {
            sample: RwSignal::new(Sample::Idle),
            tap: RwSignal::new(Tap {
                component: components
                    .first()
                    .map(|c| c.key.clone())
                    .unwrap_or_default(),
                ..Tap::default()
            }),
            notice: RwSignal::new(None),
        };
        let state = match self.owner.get_value() {
            Some(owner) => owner.with(create),
            None => create(),
        };
        self.panels
            .update_value(|p| _ = p.insert(pipeline_id.to_owned(), state));
        state
    }
}

async fn sleep_ms(ms: u32) {
    #[cfg(feature = "hydrate")]
    gloo_timers::future::TimeoutFuture::new(ms).await;
    #[cfg(not(feature = "hydrate"))]
    let _ = ms;
}

#[component]
pub fn LivePipeline(
    node_id: String,
    pipeline_id: String,
    pipeline_name: String,
    components: Vec<Component>,
    state: PanelState,
) -> impl IntoView {
    let PanelState {
        sample,
        tap,
        notice,
    } = state;
    let keys: Vec<String> = components.iter().map(|c| c.key.clone()).collect();
    let ids = StoredValue::new((node_id.clone(), pipeline_id.clone()));

    let on_sample = {
        let keys = keys.clone();
        move |_| {
            let keys = keys.clone();
            let (node, pipeline) = ids.get_value();
            sample.set(Sample::Waiting);
            spawn_local(async move {
                let asked = keys.len();
                let request =
                    match request_sample(node.clone(), pipeline, keys, Some(SAMPLE_LIMIT)).await {
                        Ok(id) => id,
                        Err(e) => {
                            sample.try_set(Sample::Failed(error_text(&e)));
                            return;
                        }
                    };
                loop {
                    sleep_ms(1_000).await;
                    let state = match sample_results(node.clone(), request.clone()).await {
                        Ok(view) => sample_state(view, asked),
                        Err(e) => Sample::Failed(error_text(&e)),
                    };
                    let waiting = matches!(
                        state,
                        Sample::Waiting | Sample::Answered { done: false, .. }
                    );
                    // The page went away: stop asking.
                    if sample.try_set(state).is_some() || !waiting {
                        break;
                    }
                }
            });
        }
    };

    let on_tap = move |_| {
        let (node, pipeline) = ids.get_value();
        if let Some(request) = tap.with_untracked(|t| t.running.clone()) {
            spawn_local(async move {
                let stopped = stop_tap(node, request).await;
                tap.try_update(|t| {
                    t.running = None;
                    match stopped {
                        Ok(()) => t.ended = Some("stopped".into()),
                        Err(e) => t.error = Some(error_text(&e)),
                    }
                });
            });
            return;
        }
        let component = tap.with_untracked(|t| t.component.clone());
        tap.set(Tap {
            component: component.clone(),
            ..Tap::default()
        });
        spawn_local(async move {
            let request = match start_tap(node.clone(), pipeline, component).await {
                Ok(id) => id,
                Err(e) => {
                    tap.try_update(|t| t.error = Some(error_text(&e)));
                    return;
                }
            };
            tap.try_update(|t| t.running = Some(request.clone()));
            loop {
                sleep_ms(1_000).await;
                let still =
                    tap.try_with_untracked(|t| (t.running.as_ref() == Some(&request), t.last));
                let Some((true, after)) = still else { break };
                match tap_events(node.clone(), request.clone(), Some(after)).await {
                    Ok(read) => {
                        tap.try_update(|t| t.take(read));
                    }
                    Err(e) => {
                        tap.try_update(|t| {
                            t.error = Some(error_text(&e));
                            t.running = None;
                        });
                        break;
                    }
                }
            }
        });
    };

    let on_restart = {
        let question = format!("Restart pipeline {pipeline_name} on this node?");
        move |_| {
            if !confirmed(&question) {
                return;
            }
            let (node, pipeline) = ids.get_value();
            spawn_local(async move {
                notice.try_set(Some(match restart_pipeline(node, pipeline).await {
                    Ok(()) => Ok("Restart sent: the node restarts the pipeline when it hears it (at once over push).".into()),
                    Err(e) => Err(error_text(&e)),
                }));
            });
        }
    };

    let options = components
        .iter()
        .map(|c| {
            let key = c.key.clone();
            view! { <option value=key.clone()>{format!("{} ({})", key, c.kind)}</option> }
        })
        .collect_view();
    let none = components.is_empty();
    view! {
        <section class="card" data-testid="live-pipeline" data-pipeline=pipeline_id.clone()
            aria-label=format!("Live: {pipeline_name}")>
            <h3>{pipeline_name.clone()}</h3>
            <div class="actions">
                <button data-testid="sample-events" on:click=on_sample
                    disabled=move || none || sample.with(|s| matches!(s, Sample::Waiting))>
                    "Sample events"
                </button>
                <label>"Tap "
                    <select data-testid="tap-component" disabled=none
                        prop:value=move || tap.with(|t| t.component.clone())
                        on:change=move |ev| tap.update(|t| t.component = event_target_value(&ev))>
                        {options}
                    </select>
                </label>
                <button data-testid="tap" on:click=on_tap disabled=none>
                    {move || if tap.with(|t| t.running.is_some()) { "Stop tap" } else { "Start tap" }}
                </button>
                <button class="secondary" data-testid="restart" on:click=on_restart>"Restart"</button>
            </div>
            {none.then(|| view! { <p class="muted">"The version this node runs names no components to sample."</p> })}
            {move || notice.get().map(|n| match n {
                Ok(text) => view! { <p class="ok" role="status">{text}</p> }.into_any(),
                Err(text) => view! { <ErrorBox message=text/> }.into_any(),
            })}
            {move || sample_view(sample.get())}
            {move || tap_view(tap.get())}
        </section>
    }
}

fn sample_view(sample: Sample) -> AnyView {
    match sample {
        Sample::Idle => ().into_any(),
        Sample::Waiting => view! { <p class="muted" role="status" data-testid="sample-status">"Waiting for the node's answer..."</p> }.into_any(),
        Sample::NoAnswer => view! {
            <p class="failure" role="status" data-testid="sample-status">
                "No answer in 30 s: the node may be offline, or its agent does not answer sample requests."
            </p>
        }.into_any(),
        Sample::Failed(text) => view! { <ErrorBox message=text/> }.into_any(),
        Sample::Answered { view: answers, done } => view! {
            <div data-testid="sample-results">
                {(!done).then(|| view! { <p class="muted" role="status">"Waiting for the other components..."</p> })}
                {answers.results.into_iter().map(|r| view! {
                    <div class="sample" data-component=r.component_key.clone()>
                        <h4>{r.component_key.clone()} <span class="muted small">{format!(" {} events", r.events.len())}</span></h4>
                        {r.error.map(|e| view! { <p class="failure">{e}</p> })}
                        {(!r.schema.is_empty()).then(|| view! {
                            <table class="small" data-testid="sample-schema">
                                <thead><tr><th scope="col">"Field"</th><th scope="col">"Type"</th><th scope="col">"Example"</th></tr></thead>
                                <tbody>
                                    {r.schema.into_iter().map(|(path, kind, example)| view! {
                                        <tr><td><code>{path}</code></td><td>{kind}</td><td class="small">{example}</td></tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        })}
                        {(!r.events.is_empty()).then(|| view! {
                            <pre class="logs" data-testid="sample-events-list">{r.events.join("\n")}</pre>
                        })}
                    </div>
                }).collect_view()}
            </div>
        }.into_any(),
    }
}

fn tap_view(tap: Tap) -> AnyView {
    if tap.running.is_none() && tap.events.is_empty() && tap.ended.is_none() && tap.error.is_none()
    {
        return ().into_any();
    }
    let status = match (&tap.running, &tap.ended) {
        (Some(_), _) => format!(
            "Tapping {}: {} events so far",
            tap.component,
            tap.events.len()
        ),
        (None, Some(end)) => format!(
            "Tap on {} ended ({end}): {} events",
            tap.component,
            tap.events.len()
        ),
        (None, None) => format!("Tap on {}", tap.component),
    };
    view! {
        <div data-testid="tap-view">
            <p class="muted" role="status">{status}</p>
            {tap.error.map(|e| view! { <ErrorBox message=e/> })}
            <pre class="logs" data-testid="tap-events">
                {tap.events.iter().map(|(_, at, body)| format!("{} {body}\n", format_time(*at))).collect::<String>()}
            </pre>
        </div>
    }.into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::SampleResultView;

    fn answered(keys: &[&str], now: i64) -> SampleView {
        SampleView {
            now,
            expires_at: 30_000,
            results: keys
                .iter()
                .map(|k| SampleResultView {
                    component_key: k.to_string(),
                    events: vec!["{}".into()],
                    schema: vec![],
                    error: None,
                })
                .collect(),
        }
    }

    #[test]
    fn a_sample_waits_until_every_component_answered_or_it_expired() {
        assert_eq!(sample_state(answered(&[], 1_000), 2), Sample::Waiting);
        assert_eq!(sample_state(answered(&[], 31_000), 2), Sample::NoAnswer);
        let partial = sample_state(answered(&["in"], 1_000), 2);
        assert!(matches!(partial, Sample::Answered { done: false, .. }));
        let late = sample_state(answered(&["in"], 31_000), 2);
        assert!(matches!(late, Sample::Answered { done: true, .. }));
        let all = sample_state(answered(&["in", "out"], 1_000), 2);
        assert!(matches!(all, Sample::Answered { done: true, .. }));
    }

    #[test]
    fn a_tap_keeps_the_newest_events_and_stops_at_its_end() {
        let mut tap = Tap {
            running: Some("t1".into()),
            ..Tap::default()
        };
        let events = (1..=250)
            .map(|i| (i, i, format!("{{\"n\":{i}}}")))
            .collect();
        tap.take(TapView {
            events,
            ended: None,
            last: 250,
        });
        assert_eq!(tap.events.len(), TAP_SHOWN);
        assert_eq!(tap.events[0].0, 51);
        assert_eq!(tap.last, 250);
        assert!(tap.running.is_some());
        tap.take(TapView {
            events: vec![],
            ended: Some("stopped".into()),
            last: 251,
        });
        assert_eq!(tap.running, None);
        assert_eq!(tap.ended.as_deref(), Some("stopped"));
    }
}
