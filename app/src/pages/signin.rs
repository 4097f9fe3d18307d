//! `/signin` and `/setup`: plain HTML forms posted to the server's own routes, so they work
//! before (and without) the page hydrating. They ask the server nothing while rendering.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// A non-empty query parameter of this page.
fn query_param(name: &str) -> Option<String> {
    use_query_map()
        .read_untracked()
        .get(name)
        .filter(|v| !v.is_empty())
}

#[component]
pub fn SignInPage() -> impl IntoView {
    let next = query_param("next").unwrap_or_else(|| "/".into());
    let error = query_param("error");
    let setup_done = query_param("setup").as_deref() == Some("done");
    view! {
        <section class="card signin" aria-labelledby="signin-title">
            <h1 id="signin-title">"Sign in to VectorFlow"</h1>
            {setup_done.then(|| view! {
                <p class="ok" role="status">"The admin account is ready: sign in with it."</p>
            })}
            {error.map(|e| view! { <div class="error" role="alert">{e}</div> })}
            <form class="form" method="post" action="/signin">
                <input type="hidden" name="next" value=next/>
                <label>"Email" <input type="email" name="email" autocomplete="username" required autofocus/></label>
                <label>"Password" <input type="password" name="password" autocomplete="current-password" required/></label>
                <button type="submit" class="primary">"Sign in"</button>
            </form>
        </section>
    }
}

#[component]
pub fn SetupPage() -> impl IntoView {
    let token = query_param("token").unwrap_or_default();
    let error = query_param("error");
    view! {
        <section class="card signin" aria-labelledby="setup-title">
            <h1 id="setup-title">"Create the first admin"</h1>
            <p class="muted">"This one-time link creates the account that administers every environment."</p>
            {error.map(|e| view! { <div class="error" role="alert">{e}</div> })}
            <form class="form" method="post" action="/setup">
                <input type="hidden" name="token" value=token/>
                <label>"Email" <input type="email" name="email" autocomplete="username" required autofocus/></label>
                <label>"Password" <input type="password" name="password" autocomplete="new-password" required/></label>
                <button type="submit" class="primary">"Create admin"</button>
            </form>
        </section>
    }
}
