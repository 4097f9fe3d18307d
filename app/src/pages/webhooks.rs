//! `/webhooks`: the environment's webhooks (admins): register a URL for release events (its
//! secret is shown once), delete one, and see each webhook's deliveries (status, attempts,
//! response code, latency, error) with "Redeliver". docs/webhooks.md says what is sent.

use leptos::prelude::*;

use crate::api::error_text;
use crate::api::webhooks::{
    list_webhooks, webhook_deliveries, CreateWebhook, DeleteWebhook, Redeliver,
};
use crate::components::{
    confirmed, current_env, load, use_env_name, use_tick, ErrorBox, Loaded, Table,
};
use crate::types::format_time;
use vf_rules::events::WEBHOOK_EVENTS as EVENTS;

#[component]
pub fn WebhooksPage() -> impl IntoView {
    let env_name = use_env_name();
    let create = ServerAction::<CreateWebhook>::new();
    let delete = ServerAction::<DeleteWebhook>::new();
    let redeliver = ServerAction::<Redeliver>::new();
    let selected = RwSignal::new(None::<String>);
    let tick = use_tick(5_000);
    let hooks = load(
        move || {
            (
                env_name.get(),
                create.version().get(),
                delete.version().get(),
            )
        },
        move |(name, _, _)| async move {
            let Some(env) = current_env(name).await? else {
                return Ok(None);
            };
            let hooks = list_webhooks(env.id.clone()).await?;
            Ok(Some((env, hooks)))
        },
    );
    let deliveries = load(
        move || (selected.get(), redeliver.version().get(), tick.get()),
        |(id, _, _)| async move {
            match id {
                Some(id) => webhook_deliveries(id).await.map(Some),
                None => Ok(None),
            }
        },
    );
    let url = RwSignal::new(String::new());
    let secret = RwSignal::new(String::new());
    let slack = RwSignal::new(false);
    let chosen = RwSignal::new(vec![
        "release.rolled_back".to_string(),
        "gate.failed".to_string(),
        "release.completed".to_string(),
    ]);
    view! {
        <h1>"Webhooks"</h1>
        <p class="muted">
            "URLs that hear of this environment's release events, signed with their secret (X-VectorFlow-Signature). See docs/webhooks.md."
        </p>
        <Loaded resource=hooks let:loaded>
            {match loaded {
                None => view! { <p class="empty">"No environment yet."</p> }.into_any(),
                Some((env, hooks)) => {
                    let env_id = env.id.clone();
                    view! {
                        <Table rows=hooks testid="webhooks-table" empty="No webhooks yet."
                            columns=&["URL", "Events", "Body", "Created"] actions=true let:w>
                            {
                                let id = w.id.clone();
                                let shown = w.id.clone();
                                let url = w.url.clone();
                                view! {
                                    <tr data-webhook=w.id.clone()>
                                        <th scope="row" class="small">{w.url.clone()}</th>
                                        <td class="small">{w.events.join(", ")}</td>
                                        <td>{if w.slack { "Slack text" } else { "event JSON" }}</td>
                                        <td class="small">{format!("{} by {}", format_time(w.created_at), w.created_by)}</td>
                                        <td>
                                            <button class="small" data-testid="show-deliveries"
                                                on:click=move |_| selected.set(Some(shown.clone()))>"Deliveries"</button>
                                            <button class="danger small" on:click=move |_| {
                                                if confirmed(&format!("Delete the webhook to {url}? Its deliveries go with it.")) {
                                                    delete.dispatch(DeleteWebhook { id: id.clone() });
                                                }
                                            }>"Delete"</button>
                                        </td>
                                    </tr>
                                }
                            }
                        </Table>
                        <form class="card form" data-testid="webhook-form" on:submit=move |ev| {
                            ev.prevent_default();
                            create.dispatch(CreateWebhook {
                                environment_id: env_id.clone(),
                                url: url.get_untracked(),
                                events: chosen.get_untracked(),
                                slack: slack.get_untracked(),
                                secret: crate::components::non_blank(&secret.get_untracked()),
                            });
                        }>
                            <h2>"New webhook"</h2>
                            <label>"URL" <input required type="url" bind:value=url placeholder="https://ci.example.com/vectorflow"/></label>
                            <fieldset>
                                <legend>"Events"</legend>
                                {EVENTS.iter().map(|e| {
                                    let e = e.to_string();
                                    let name = e.clone();
                                    let checked = chosen.get_untracked().contains(&e);
                                    view! {
                                        <label class="inline">
                                            <input type="checkbox" value=e.clone() checked=checked
                                                on:change=move |ev| {
                                                    let on = event_target_checked(&ev);
                                                    chosen.update(|c| {
                                                        c.retain(|x| x != &name);
                                                        if on { c.push(name.clone()); }
                                                    });
                                                }/>
                                            {e.clone()}
                                        </label>
                                    }
                                }).collect_view()}
                            </fieldset>
                            <label class="inline"><input type="checkbox" bind:checked=slack/>"Slack-compatible body ({\"text\": ...})"</label>
                            <label>"Secret (optional, 16 characters or more; one is generated otherwise)"
                                <input bind:value=secret autocomplete="off"/>
                            </label>
                            <button type="submit" class="primary">"Add webhook"</button>
                        </form>
                    }.into_any()
                }
            }}
        </Loaded>
        {move || create.value().get().map(|r| match r {
            Ok(created) => view! {
                <p class="ok" role="status" data-testid="webhook-secret">
                    "Webhook added. Its secret, shown only now: " <code>{created.secret}</code>
                </p>
            }.into_any(),
            Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
        })}
        {move || delete.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
        {move || redeliver.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
        <Loaded resource=deliveries hide_loading=true let:shown>
            {shown.map(|rows| view! {
                <h2>"Deliveries"</h2>
                <Table rows=rows testid="deliveries-table" empty="Nothing sent yet."
                    columns=&["Event", "Status", "Attempts", "Response", "Latency", "Last attempt", "Error"] actions=true let:d>
                    {
                        let id = d.id.clone();
                        view! {
                            <tr data-status=d.status.clone()>
                                <th scope="row">{d.event.clone()}</th>
                                <td>{d.status.clone()}</td>
                                <td>{d.attempts}</td>
                                <td>{d.response_code.map(|c| c.to_string()).unwrap_or_else(|| "-".into())}</td>
                                <td>{d.latency_ms.map(|ms| format!("{ms} ms")).unwrap_or_else(|| "-".into())}</td>
                                <td class="small">{d.last_attempt_at.map(format_time).unwrap_or_else(|| "-".into())}</td>
                                <td class="small">{d.error.clone().unwrap_or_default()}</td>
                                <td><button class="small" on:click=move |_| {
                                    redeliver.dispatch(Redeliver { delivery_id: id.clone() });
                                }>"Redeliver"</button></td>
                            </tr>
                        }
                    }
                </Table>
            })}
        </Loaded>
    }
}
