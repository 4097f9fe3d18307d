//! The page frame: header, environment picker, navigation, who is signed in; and the
//! helpers pages use to know the selected environment and to refresh live.

use super::load;
use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::{use_location, use_query_map};

use super::hold::{BannerOf, HoldBanner};
use super::session::Session;
use crate::api::fleet::list_environments;
use crate::types::EnvironmentView;

/// The environment name chosen in the URL (`?env=staging`), if any.
pub fn use_env_name() -> Memo<Option<String>> {
    let query = use_query_map();
    Memo::new(move |_| query.read().get("env").filter(|s| !s.is_empty()))
}

/// The environment a page shows: the one named in the URL, else the first one.
pub async fn current_env(name: Option<String>) -> Result<Option<EnvironmentView>, ServerFnError> {
    let envs = list_environments().await?;
    Ok(match name {
        Some(n) => envs.into_iter().find(|e| e.name == n),
        None => envs.into_iter().next(),
    })
}

/// A counter that goes up every `ms` milliseconds in the browser (never on the server), for
/// resources that refresh live.
pub fn use_tick(ms: u64) -> ReadSignal<u64> {
    let (tick, set_tick) = signal(0u64);
    Effect::new(move |_| {
        let handle = set_interval_with_handle(
            move || set_tick.update(|t| *t += 1),
            std::time::Duration::from_millis(ms),
        )
        .ok();
        on_cleanup(move || {
            if let Some(h) = handle {
                h.clear();
            }
        });
    });
    tick
}

/// Pages shown before anyone signs in: a bare frame that asks the server nothing.
fn is_signed_out_page(path: &str) -> bool {
    matches!(path, "/signin" | "/setup")
}

#[component]
pub fn Layout(children: Children) -> impl IntoView {
    // Signing in and out are full page loads, so the frame is chosen once per page.
    if is_signed_out_page(&use_location().pathname.get_untracked()) {
        return view! { <main class="page bare">{children()}</main> }.into_any();
    }
    let session = Session::provide();
    let env_name = use_env_name();
    let envs = load(|| (), |_| list_environments());
    // The banner of the environment shown; a pipeline's page shows its own environment's.
    let path = use_location().pathname;
    let banner = Signal::derive(move || {
        if path.get().starts_with("/pipelines/") {
            BannerOf::Nothing
        } else {
            BannerOf::Environment(env_name.get())
        }
    });
    let suffix = move || {
        env_name
            .get()
            .map(|n| format!("?env={n}"))
            .unwrap_or_default()
    };
    // On a phone the navigation folds into a menu (the stylesheet shows the button only on
    // narrow screens); following a link folds it again.
    let menu_open = RwSignal::new(false);
    Effect::watch(
        move || path.get(),
        move |_, _, _| menu_open.set(false),
        false,
    );
    view! {
        <header class="topbar" class:menu-open=move || menu_open.get()>
            <a class="brand" href="/">"VectorFlow"</a>
            <button type="button" class="menu-toggle" aria-controls="main-nav"
                aria-expanded=move || if menu_open.get() { "true" } else { "false" }
                on:click=move |_| menu_open.update(|open| *open = !*open)>
                "Menu"
            </button>
            <nav aria-label="Main" id="main-nav">
                <A href=move || format!("/{}", suffix())>"Fleet"</A>
                <A href=move || format!("/groups{}", suffix())>"Node groups"</A>
                <A href=move || format!("/pipelines{}", suffix())>"Pipelines"</A>
                <A href=move || format!("/environments{}", suffix())>"Environments"</A>
                <A href=move || format!("/webhooks{}", suffix())>"Webhooks"</A>
                <Transition fallback=|| ()>
                    {move || Suspend::new(async move {
                        let roles = session.roles().await;
                        view! {
                            {roles.can("viewer", "*").then(|| view! {
                                <A href="/admin/edge-config">"Edge config"</A>
                                <A href="/audit">"Audit"</A>
                            })}
                            {roles.can("admin", "*").then(|| view! { <A href="/users">"Users"</A> })}
                        }
                    })}
                </Transition>
            </nav>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let envs = envs.await.unwrap_or_default();
                    let selected = env_name
                        .get()
                        .or_else(|| envs.first().map(|e| e.name.clone()))
                        .unwrap_or_default();
                    view! {
                        <div class="env-picker">
                            <span class="muted">"Environment"</span>
                            {envs
                                .into_iter()
                                .map(|e| {
                                    let active = e.name == selected;
                                    view! {
                                        <a
                                            class:active=active
                                            aria-current=if active { Some("true") } else { None }
                                            href=format!("/?env={}", e.name)
                                        >
                                            {e.name.clone()}
                                        </a>
                                    }
                                })
                                .collect_view()}
                        </div>
                    }
                })}
            </Transition>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    session.roles().await.name().map(|name| view! {
                        <div class="whoami">
                            <span class="sr-only">"Signed in as "</span>
                            <a href="/account" data-testid="signed-in-as" title="Your account">{name}</a>
                            <form method="post" action="/signout">
                                <button type="submit" class="small">"Sign out"</button>
                            </form>
                        </div>
                    })
                })}
            </Transition>
        </header>
        <main class="page">
            <HoldBanner of=banner/>
            {children()}
        </main>
    }
    .into_any()
}
