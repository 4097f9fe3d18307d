//! The API tokens section of `/users`: tokens listed by prefix, a form that mints one and
//! shows it once, and revocation.

use leptos::prelude::*;

use super::{environment_label, environment_options, Environments};
use crate::api::accounts::{list_api_tokens, ApiTokenView, CreateApiToken, RevokeApiToken};
use crate::api::error_text;
use crate::components::{Can, ErrorBox};
use crate::types::{format_time, EnvironmentView};

#[component]
pub fn ApiTokens(envs: Environments) -> impl IntoView {
    let create = ServerAction::<CreateApiToken>::new();
    let revoke = ServerAction::<RevokeApiToken>::new();
    let tokens = Resource::new(
        move || (create.version().get(), revoke.version().get()),
        |_| list_api_tokens(),
    );
    view! {
        <section aria-labelledby="tokens-title">
            <h2 id="tokens-title">"API tokens"</h2>
            <p class="muted">
                "For automation: send " <code>"Authorization: Bearer <token>"</code>
                ". An edge-config token only reads " <code>"GET /api/edge-config"</code> "."
            </p>
            <Transition fallback=|| view! { <p class="muted">"Loading..."</p> }>
                {move || Suspend::new(async move {
                    let envs = envs.await.unwrap_or_default();
                    match tokens.await {
                        Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
                        Ok(t) if t.is_empty() => view! { <p class="empty">"No API tokens yet."</p> }.into_any(),
                        Ok(t) => view! { <TokensTable tokens=t envs revoke/> }.into_any(),
                    }
                })}
            </Transition>
            {move || revoke.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
            <Can role="admin" env="*">
                <Transition fallback=|| ()>
                    {move || Suspend::new(async move {
                        envs.await.ok().map(|envs| view! { <NewTokenForm envs create/> })
                    })}
                </Transition>
            </Can>
            {move || create.value().get().map(|r| match r {
                Ok(token) => view! {
                    <div class="card ok" role="status">
                        <p>"Copy this token now: it is shown only once."</p>
                        <code class="secret" data-testid="new-api-token">{token}</code>
                    </div>
                }.into_any(),
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
            })}
        </section>
    }
}

#[component]
fn TokensTable(
    tokens: Vec<ApiTokenView>,
    envs: Vec<EnvironmentView>,
    revoke: ServerAction<RevokeApiToken>,
) -> impl IntoView {
    view! {
        <table class="grid" data-testid="api-tokens">
            <thead><tr>
                <th scope="col">"Name"</th><th scope="col">"Prefix"</th>
                <th scope="col">"Environment"</th><th scope="col">"Role"</th>
                <th scope="col">"Created by"</th><th scope="col">"Created"</th>
                <th scope="col">"Last used"</th><th scope="col">"State"</th>
                <th scope="col"><span class="sr-only">"Actions"</span></th>
            </tr></thead>
            <tbody>
                {tokens.into_iter().map(|t| {
                    let (id, name) = (t.id.clone(), t.name.clone());
                    view! {
                        <tr data-token=t.name.clone()>
                            <th scope="row">{t.name.clone()}</th>
                            <td class="mono">{format!("{}...", t.prefix)}</td>
                            <td>{environment_label(&envs, &t.environment_id)}</td>
                            <td>{t.role.clone()}</td>
                            <td>{t.created_by.clone()}</td>
                            <td>{format_time(t.created_at)}</td>
                            <td>{t.last_used_at.map(format_time).unwrap_or_else(|| "never".into())}</td>
                            <td>{if t.revoked { "revoked" } else { "active" }}</td>
                            <td>{(!t.revoked).then(|| view! {
                                <button class="danger small" aria-label=format!("Revoke API token {name}") on:click=move |_| {
                                    let ok = crate::components::confirmed(&format!("Revoke API token {name}? Its next request is refused."));
                                    if ok { revoke.dispatch(RevokeApiToken { token_id: id.clone() }); }
                                }>"Revoke"</button>
                            })}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn NewTokenForm(envs: Vec<EnvironmentView>, create: ServerAction<CreateApiToken>) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let environment = RwSignal::new("*".to_string());
    let role = RwSignal::new("viewer".to_string());
    view! {
        <form class="card form inline" aria-label="New API token" on:submit=move |ev| {
            ev.prevent_default();
            create.dispatch(CreateApiToken {
                name: name.get_untracked(),
                environment_id: environment.get_untracked(),
                role: role.get_untracked(),
            });
        }>
            <label>"Name" <input required bind:value=name placeholder="ci-deploys"/></label>
            <label>"Environment"
                <select on:change=move |ev| environment.set(event_target_value(&ev))>
                    {environment_options(&envs)}
                </select>
            </label>
            <label>"Role"
                <select on:change=move |ev| role.set(event_target_value(&ev))>
                    <option value="viewer" selected>"viewer"</option>
                    <option value="editor">"editor"</option>
                    <option value="admin">"admin"</option>
                    <option value="edge-config">"edge-config"</option>
                </select>
            </label>
            <button type="submit" disabled=move || create.pending().get()>"Create API token"</button>
        </form>
    }
}
