//! Environments and their agent enrollment tokens (shown once, listed by prefix). Tokens
//! are an environment admin's business; creating environments is for admins of all of them.

use crate::components::load;
use leptos::prelude::*;

use crate::api::error_text;
use crate::api::fleet::{
    list_enrollment_tokens, CreateEnrollmentToken, CreateEnvironment, RevokeEnrollmentToken,
};
use crate::api::freeze::{
    environment_hold, list_freeze_windows, CreateFreezeWindow, DeleteFreezeWindow, LiftLine,
    StopLine,
};
use crate::components::{current_env, use_env_name, use_session, Can, ErrorBox, Loaded, Table};
use crate::components::{reason_prompt, releases_text};
use crate::types::format_time;

#[component]
pub fn EnvironmentsPage() -> impl IntoView {
    let env_name = use_env_name();
    let session = use_session();
    let create_env = ServerAction::<CreateEnvironment>::new();
    let create_token = ServerAction::<CreateEnrollmentToken>::new();
    let revoke = ServerAction::<RevokeEnrollmentToken>::new();
    let data = load(
        move || {
            (
                env_name.get(),
                create_env.version().get(),
                create_token.version().get(),
                revoke.version().get(),
            )
        },
        move |(name, _, _, _)| async move {
            let Some(env) = current_env(name).await? else {
                return Ok(None);
            };
            if !session.roles().await.can("admin", &env.id) {
                return Ok(Some((env, None)));
            }
            let tokens = list_enrollment_tokens(env.id.clone()).await?;
            Ok(Some((env, Some(tokens))))
        },
    );
    let new_name = RwSignal::new(String::new());
    let token_label = RwSignal::new(String::new());
    view! {
        <h1>"Environments"</h1>
        <LineAndFreezes env_name/>
        <Loaded resource=data let:loaded>
            {match loaded {
                None => view! { <p class="empty">"No environment yet: create one below."</p> }.into_any(),
                Some((env, None)) => view! {
                    <p class="empty">{format!("Enrollment tokens of {} are managed by its admins.", env.name)}</p>
                }.into_any(),
                Some((env, Some(tokens))) => {
                    let env_id = env.id.clone();
                    view! {
                        <section class="card">
                            <h2>{format!("Enrollment tokens of {}", env.name)}</h2>
                            <Table rows=tokens columns=&["Prefix", "Label", "Created", "State"] actions=true let:t>
                                <tr>
                                    <td class="mono">{format!("{}...", t.prefix)}</td>
                                    <td>{t.label.clone()}</td>
                                    <td>{format_time(t.created_at)}</td>
                                    <td>{if t.revoked { "revoked" } else { "active" }}</td>
                                    <td>{(!t.revoked).then(|| {
                                        let (id, prefix) = (t.id.clone(), t.prefix.clone());
                                        view! {
                                            <button class="danger small" on:click=move |_| {
                                                let ok = crate::components::confirmed(&format!("Revoke enrollment token {prefix}...? Agents can no longer enroll with it."));
                                                if ok { revoke.dispatch(RevokeEnrollmentToken { token_id: id.clone() }); }
                                            }>"Revoke"</button>
                                        }
                                    })}</td>
                                </tr>
                            </Table>
                            <form class="form inline" on:submit=move |ev| {
                                ev.prevent_default();
                                create_token.dispatch(CreateEnrollmentToken {
                                    environment_id: env_id.clone(),
                                    label: token_label.get_untracked(),
                                });
                            }>
                                <label>"Label " <input bind:value=token_label placeholder="eu-west agents"/></label>
                                <button type="submit">"New enrollment token"</button>
                            </form>
                        </section>
                    }.into_any()
                }
            }}
        </Loaded>
        {move || create_token.value().get().map(|r| match r {
            Ok(token) => view! {
                <div class="card ok" role="status">
                    <p>"Copy this token now: it is shown only once."</p>
                    <code class="secret" data-testid="new-token">{token}</code>
                </div>
            }.into_any(),
            Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
        })}
        <Can role="admin" env="*">
        <form class="card form" on:submit=move |ev| {
            ev.prevent_default();
            create_env.dispatch(CreateEnvironment { name: new_name.get_untracked() });
        }>
            <h2>"New environment"</h2>
            <label>"Name" <input required bind:value=new_name placeholder="production"/></label>
            <button type="submit">"Create environment"</button>
            {move || create_env.value().get().map(|r| match r {
                Ok(e) => {
                    let href = format!("/?env={}", e.name);
                    view! { <p class="ok" role="status">"Created " <a href=href>{e.name}</a></p> }.into_any()
                }
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
            })}
        </form>
        </Can>
    }
}

/// An admin's controls of the environment's holds: stop or lift the line, and the freeze
/// windows (add, delete). Its resource is created with the page, never inside another
/// resource's view, so server and browser agree on it when hydrating.
#[component]
fn LineAndFreezes(env_name: Memo<Option<String>>) -> impl IntoView {
    let session = use_session();
    let stop = ServerAction::<StopLine>::new();
    let lift = ServerAction::<LiftLine>::new();
    let add = ServerAction::<CreateFreezeWindow>::new();
    let delete = ServerAction::<DeleteFreezeWindow>::new();
    let data = load(
        move || {
            (
                env_name.get(),
                stop.version().get(),
                lift.version().get(),
                add.version().get(),
                delete.version().get(),
            )
        },
        move |(name, ..)| async move {
            let Some(env) = current_env(name).await? else {
                return Ok(None);
            };
            if !session.roles().await.can("admin", &env.id) {
                return Ok(None);
            }
            let hold = environment_hold(env.id.clone()).await?;
            let windows = list_freeze_windows(env.id).await?;
            Ok::<_, ServerFnError>(Some((hold, windows)))
        },
    );
    let window = RwSignal::new(String::new());
    let window_reason = RwSignal::new(String::new());

    let line_outcome = move || {
        let stopped = stop
            .value()
            .get()
            .map(|r| r.map(|c| releases_text(c.releases.len(), "paused")));
        let lifted = lift
            .value()
            .get()
            .map(|r| r.map(|c| releases_text(c.releases.len(), "resumed")));
        let latest = if stop.version().get() >= lift.version().get() {
            stopped
        } else {
            lifted
        };
        latest.map(|r| match r {
            Ok(text) => view! { <p class="ok" role="status">{text}</p> }.into_any(),
            Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
        })
    };
    view! {
        <Loaded resource=data hide_loading=true let:loaded>
            {loaded.map(|(hold, windows)| {
                let env_id = hold.environment_id.clone();
                let name = hold.environment.clone();
                let for_window = env_id.clone();
                let add_window = move |ev: leptos::ev::SubmitEvent| {
                    ev.prevent_default();
                    add.dispatch(CreateFreezeWindow {
                        environment_id: for_window.clone(),
                        window: window.get_untracked(),
                        reason: crate::components::non_blank(&window_reason.get_untracked()),
                    });
                };
                let line = match hold.line_stopped.clone() {
                    None => view! {
                        <p>"The line runs: releases and deploys go ahead."</p>
                        <button class="danger" data-testid="stop-line" on:click=move |_| {
                            let question = format!("Stop the line of {name}? Every in-flight release there pauses, and new releases and direct deploys are refused until the line is lifted.");
                            if !crate::components::confirmed(&question) { return; }
                            let Some(reason) = reason_prompt("Reason (shown in the banner and in every refusal):") else { return };
                            stop.dispatch(StopLine { environment_id: env_id.clone(), reason });
                        }>"Stop the line"</button>
                    }.into_any(),
                    Some(l) => view! {
                        <p>{format!("Stopped by {} since {}{}.", l.by, format_time(l.at), l.reason.map(|r| format!(": {r}")).unwrap_or_default())}</p>
                        <button class="primary" data-testid="lift-line" on:click=move |_| {
                            let Some(reason) = reason_prompt("Lift the line? Releases the stop paused resume. Reason (optional):") else { return };
                            lift.dispatch(LiftLine { environment_id: env_id.clone(), reason });
                        }>"Lift the line"</button>
                    }.into_any(),
                };
                view! {
                    <section class="card" aria-label="Line">
                        <h2>{format!("Line of {}", hold.environment)}</h2>
                        {line}
                        {line_outcome}
                    </section>
                    <section class="card" aria-label="Freeze windows">
                        <h2>"Freeze windows"</h2>
                        <p class="hint">"While a window is open the scheduler does not advance or complete releases here, and new releases, deploys, advance and complete need an admin's override with a reason. Rolling back is always allowed."</p>
                        <Table rows=windows columns=&["Window", "Reason", "Added", "Now"] actions=true let:w>
                            <tr data-testid="freeze-window">
                                <td class="mono">{w.window.clone()}</td>
                                <td>{w.reason.clone().unwrap_or_default()}</td>
                                <td>{format!("{} by {}", format_time(w.created_at), w.created_by)}</td>
                                <td>{if w.open { "open" } else { "closed" }}</td>
                                <td>{
                                    let (id, text) = (w.id.clone(), w.window.clone());
                                    view! {
                                        <button class="danger small" on:click=move |_| {
                                            if crate::components::confirmed(&format!("Delete the freeze window {text}?")) {
                                                delete.dispatch(DeleteFreezeWindow { id: id.clone() });
                                            }
                                        }>"Delete"</button>
                                    }
                                }</td>
                            </tr>
                        </Table>
                    </section>
                    <form class="card form" aria-label="New freeze window" on:submit=add_window>
                        <h2>"New freeze window"</h2>
                        <label>"When"
                            <input name="window" required bind:value=window placeholder="Fri 16:00 - Mon 08:00 Europe/Berlin"/>
                        </label>
                        <p class="hint">"Weekly: \"Fri 16:00 - Mon 08:00 Europe/Berlin\". Once: \"2026-12-24 00:00 - 2026-12-27 08:00 Europe/Berlin\", or whole days \"2026-12-24 - 2026-12-27 UTC\"."</p>
                        <label>"Reason" <input name="freeze-reason" bind:value=window_reason placeholder="weekend"/></label>
                        <button type="submit">"Add freeze window"</button>
                        {move || add.value().get().map(|r| match r {
                            Ok(w) => view! { <p class="ok" role="status">{format!("Added {}", w.window)}</p> }.into_any(),
                            Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
                        })}
                        {move || delete.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
                    </form>
                }
            })}
        </Loaded>
    }
}
