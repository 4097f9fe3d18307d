//! The API tokens section of `/users`: tokens listed by prefix, a form that mints one and
//! shows it once, and revocation.

use crate::components::load;
use leptos::prelude::*;

use super::{environment_label, environment_options, Environments};
use crate::api::accounts::{list_api_tokens, ApiTokenView, CreateApiToken, RevokeApiToken};
use crate::api::error_text;
use crate::components::{AsyncTable, Can, ErrorBox, Loaded};
use crate::types::{format_time, EnvironmentView};

#[component]
pub fn ApiTokens(envs: Environments) -> impl IntoView {
    let create = ServerAction::<CreateApiToken>::new();
    let revoke = ServerAction::<RevokeApiToken>::new();
    let tokens = load(
        move || (create.version().get(), revoke.version().get()),
        // Each token with the name of its environment.
        move |_| async move {
            let tokens = list_api_tokens().await?;
            let envs = envs.await.unwrap_or_default();
            Ok(tokens
                .into_iter()
                .map(|t| {
                    let env = environment_label(&envs, &t.environment_id);
                    (t, env)
                })
                .collect::<Vec<_>>())
        },
    );
    view! {
        <section aria-labelledby="tokens-title">
            <h2 id="tokens-title">"API tokens"</h2>
            <p class="muted">
                "For automation: send " <code>"Authorization: Bearer <token>"</code>
                ". An edge-config token only reads " <code>"GET /api/edge-config"</code> "."
            </p>
            <AsyncTable resource=tokens testid="api-tokens"
                columns=&["Name", "Prefix", "Environment", "Role", "Created by", "Created", "Last used", "State"]
                actions=true empty="No API tokens yet." let((t, env))>
                <TokenRow t env revoke/>
            </AsyncTable>
            {move || revoke.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
            <Can role="admin" env="*">
                <Loaded resource=envs hide_loading=true hide_errors=true let:envs>
                    <NewTokenForm envs create/>
                </Loaded>
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

/// One API token, `env` naming its environment.
#[component]
fn TokenRow(t: ApiTokenView, env: String, revoke: ServerAction<RevokeApiToken>) -> impl IntoView {
    let (id, name) = (t.id.clone(), t.name.clone());
    view! {
        <tr data-token=t.name.clone()>
            <th scope="row">{t.name.clone()}</th>
            <td class="mono">{format!("{}...", t.prefix)}</td>
            <td>{env}</td>
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
