//! Small pieces every page uses. A page showing what a server call answered wraps it in
//! [`Loaded`]; a list of rows is a [`Table`], and [`AsyncTable`] is the two together.

mod hold;
mod layout;
mod loaded;
mod session;
mod table;

pub use hold::{releases_text, BannerOf, HoldBanner};
pub use layout::{current_env, use_env_name, use_tick, Layout};
pub use loaded::{load, AsyncTable, Json, Loaded, Loads};
pub use session::{use_session, Can, Roles, Session};
pub use table::Table;

use leptos::prelude::*;

use crate::types::Labels;

/// What a [`StatusBadge`] shows: a typed status (`ReleaseStatus::HealthCheck.into()`,
/// `NodeStatus::Healthy.into()`), or a process status an agent reported as text
/// (`"RUNNING"`; unknown values are kept as reported). `code` is the stored spelling (the
/// badge's `data-status` and colour), `label` the words people read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: String,
    label: String,
}

impl Status {
    /// A status read as its code says it: `ROLLED_BACK` is "Rolled back", `pass` is "Pass".
    pub fn coded(code: &str) -> Status {
        Status {
            code: code.to_owned(),
            label: human(code),
        }
    }

    /// A release paused by an operator (or a stopped line).
    pub fn paused() -> Status {
        Status::coded("PAUSED")
    }
}

/// `HEALTH_CHECK` -> "Health check", `not opened` -> "Not opened".
pub fn human(code: &str) -> String {
    let words = code.replace('_', " ").to_lowercase();
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

impl From<vf_rules::ReleaseStatus> for Status {
    fn from(status: vf_rules::ReleaseStatus) -> Status {
        Status {
            code: status.as_str().to_owned(),
            label: status.label().to_owned(),
        }
    }
}

impl From<vf_rules::NodeStatus> for Status {
    fn from(status: vf_rules::NodeStatus) -> Status {
        Status::coded(status.as_str())
    }
}

impl From<String> for Status {
    fn from(text: String) -> Status {
        Status::coded(&text)
    }
}

impl From<&str> for Status {
    fn from(text: &str) -> Status {
        Status::coded(text)
    }
}

/// A status with a colour AND its name: never colour alone.
/// `view! { <StatusBadge status=ReleaseStatus::HealthCheck/> }`
#[component]
pub fn StatusBadge(#[prop(into)] status: Status) -> impl IntoView {
    let Status { code, label } = status;
    let class = format!(
        "badge badge-{}",
        code.to_ascii_lowercase().replace(['_', ' '], "-")
    );
    view! { <span class=class data-status=code>{label}</span> }
}

/// Labels as `key=value` chips.
#[component]
pub fn LabelChips(labels: Labels) -> impl IntoView {
    if labels.is_empty() {
        return view! { <span class="muted">"none"</span> }.into_any();
    }
    view! {
        <span class="chips">
            {labels
                .into_iter()
                .map(|(k, v)| view! { <span class="chip">{k}"="{v}</span> })
                .collect_view()}
        </span>
    }
    .into_any()
}

/// A readable error from a server call.
#[component]
pub fn ErrorBox(#[prop(into)] message: String) -> impl IntoView {
    view! { <div class="error" role="alert">{message}</div> }
}

/// Asks the operator to confirm a destructive action (the browser's own dialog); `false`
/// when they cancel or no dialog can be shown.
pub fn confirmed(message: &str) -> bool {
    window().confirm_with_message(message).unwrap_or(false)
}

/// Asks the operator for an optional reason (the browser's own prompt): `None` when they
/// cancel, `Some(None)` for a blank answer.
pub fn reason_prompt(message: &str) -> Option<Option<String>> {
    let answer = window()
        .prompt_with_message_and_default(message, "")
        .ok()
        .flatten()?;
    Some(non_blank(&answer))
}

/// A filter field as server functions take it: trimmed, and None when blank.
pub fn non_blank(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}
