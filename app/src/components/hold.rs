//! The banner of an environment held by a stopped line or an open freeze window, shown on
//! every page of that environment.

use super::load;
use leptos::prelude::*;

use crate::api::freeze::{environment_hold, HoldView};
use crate::types::{format_time, plural};

use super::layout::{current_env, use_tick};
use crate::api::pipelines::get_pipeline_summary;

/// Whose banner: the environment a page shows (named in the URL, else the first), or a
/// pipeline's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BannerOf {
    Environment(Option<String>),
    Pipeline(String),
    Nothing,
}

/// The hold banner of an environment (nothing while it runs freely, or while unknown),
/// asked again every 15 s and whenever `refresh` changes.
#[component]
pub fn HoldBanner(
    #[prop(into)] of: Signal<BannerOf>,
    #[prop(optional, into)] refresh: Option<Signal<u64>>,
) -> impl IntoView {
    let tick = use_tick(15_000);
    let hold = load(
        move || (of.get(), tick.get(), refresh.map(|r| r.get())),
        |(of, _, _)| async move {
            let id = match of {
                BannerOf::Environment(name) => current_env(name).await.ok()??.id,
                BannerOf::Pipeline(id) => get_pipeline_summary(id).await.ok()?.environment_id,
                BannerOf::Nothing => return None,
            };
            environment_hold(id).await.ok()
        },
    );
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move { hold.await.map(|h| view! { <Banner h/> }) })}
        </Transition>
    }
}

#[component]
fn Banner(h: HoldView) -> impl IntoView {
    let line = h.line_stopped.map(|l| {
        let why = l.reason.map(|r| format!(": {r}")).unwrap_or_default();
        view! {
            <div class="banner danger" data-testid="hold-banner">
                <strong>{format!("The line of {} is stopped", h.environment)}</strong>
                {format!(" by {} since {}{why}. ", l.by, format_time(l.at))}
                "In-flight releases are paused; new releases and direct deploys are refused until an admin lifts it."
            </div>
        }
    });
    let freeze = h.freeze.map(|f| {
        let why = f.reason.map(|r| format!(": {r}")).unwrap_or_default();
        view! {
            <div class="banner warn" data-testid="freeze-banner">
                <strong>{format!("{} is frozen until {}", h.environment, f.until_text)}</strong>
                {format!(" ({}{why}). ", f.window)}
                "Releases are not advanced or completed; new releases and deploys need an admin's override with a reason. Rolling back is always allowed."
            </div>
        }
    });
    view! { {line} {freeze} }
}

/// "3 releases paused" and the like, for the outcome of stopping or lifting a line.
pub fn releases_text(count: usize, done: &str) -> String {
    format!("{} {done}", plural(count as i64, "release"))
}
