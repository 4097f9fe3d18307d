//! Environments and their agent enrollment tokens (shown once, listed by prefix). Tokens
//! are an environment admin's business; creating environments is for admins of all of them.

use leptos::prelude::*;

use crate::api::error_text;
use crate::api::fleet::{
    list_enrollment_tokens, CreateEnrollmentToken, CreateEnvironment, RevokeEnrollmentToken,
};
use crate::components::{current_env, use_env_name, use_session, Can, ErrorBox, Loaded, Table};
use crate::types::format_time;

#[component]
pub fn EnvironmentsPage() -> impl IntoView {
    let env_name = use_env_name();
    let session = use_session();
    let create_env = ServerAction::<CreateEnvironment>::new();
    let create_token = ServerAction::<CreateEnrollmentToken>::new();
    let revoke = ServerAction::<RevokeEnrollmentToken>::new();
    let data = Resource::new(
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
