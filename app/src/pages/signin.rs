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

/// The words for an error code the server's sign-in and setup routes send back (never text
/// from the link itself).
pub fn error_message(code: &str) -> &'static str {
    match code {
        "credentials" => "That email and password do not match an enabled account.",
        "email" => "Enter an email address like ops@example.com.",
        "password" => "The password needs at least 10 characters.",
        "token" => "This setup link is invalid, used or expired; restart the server for a new one.",
        _ => "That did not work; try again.",
    }
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
            {error.map(|e| view! { <div class="error" role="alert">{error_message(&e)}</div> })}
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
            {error.map(|e| view! { <div class="error" role="alert">{error_message(&e)}</div> })}
            <form class="form" method="post" action="/setup">
                <input type="hidden" name="token" value=token/>
                <label>"Email" <input type="email" name="email" autocomplete="username" required autofocus/></label>
                <label>"Password" <input type="password" name="password" autocomplete="new-password" required/></label>
                <button type="submit" class="primary">"Create admin"</button>
            </form>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::error_message;

    #[test]
    fn error_codes_map_to_fixed_words_and_anything_else_to_a_generic_line() {
        assert!(error_message("credentials").starts_with("That email and password"));
        assert_eq!(
            error_message("Call +1 555 0100 to restore your account"),
            "That did not work; try again."
        );
    }
}
