//! `/account`: who you are signed in as, your roles, and changing your own password.

use crate::components::load;
use leptos::prelude::*;

use crate::api::accounts::{me, ChangePassword};
use crate::api::error_text;
use crate::components::{ErrorBox, Loaded};

#[component]
pub fn AccountPage() -> impl IntoView {
    let me = load(|| (), |_| me());
    let change = ServerAction::<ChangePassword>::new();
    let current = RwSignal::new(String::new());
    let new = RwSignal::new(String::new());
    view! {
        <h1>"Your account"</h1>
        <Loaded resource=me let:m>
            <p>"Signed in as " <strong data-testid="account-name">{m.name.clone()}</strong></p>
            <ul class="plain" aria-label="Your roles">
                {m.grants.iter().map(|g| view! {
                    <li>{format!("{} in {}", g.role, if g.environment_id == "*" { "all environments".to_string() } else { g.environment_id.clone() })}</li>
                }).collect_view()}
            </ul>
        </Loaded>
        <form class="card form" aria-label="Change password" on:submit=move |ev| {
            ev.prevent_default();
            change.dispatch(ChangePassword {
                current_password: current.get_untracked(),
                new_password: new.get_untracked(),
            });
        }>
            <h2>"Change password"</h2>
            <label>"Current password" <input type="password" required autocomplete="current-password" bind:value=current/></label>
            <label>"New password" <input type="password" required minlength="10" autocomplete="new-password" bind:value=new/></label>
            <div>
                <button type="submit" class="primary" disabled=move || change.pending().get()>"Change password"</button>
            </div>
            {move || change.value().get().map(|r| match r {
                Ok(()) => view! {
                    <p class="ok" role="status">
                        "Password changed; every session was signed out. "
                        <a href="/signin" rel="external">"Sign in again"</a>
                    </p>
                }.into_any(),
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
            })}
        </form>
    }
}
