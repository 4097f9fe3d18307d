//! `Loaded` and `AsyncTable`: what a page shows of a server call while it loads, when it
//! fails and once it answered, written once instead of a `Transition` and a `match` per page.

use std::future::Future;
use std::sync::Arc;

use leptos::prelude::*;
use leptos::server::codee::{Decoder, Encoder};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::table::{table_view, TableSpec};
use super::ErrorBox;
use crate::api::error_text;

/// How a resource's value travels from the server's render to the browser's hydration:
/// JSON, decoded with `serde_json::from_slice` as the server functions' answers are. The
/// browser then carries one JSON decoder per type instead of two (Leptos' default codec
/// decodes from `&str`): 7 % less wasm (docs/benchmarks.md, "Browser bundle").
pub struct Json;

impl<T: Serialize> Encoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = String;

    fn encode(value: &T) -> Result<String, serde_json::Error> {
        serde_json::to_string(value)
    }
}

impl<T: DeserializeOwned> Decoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = str;

    fn decode(text: &str) -> Result<T, serde_json::Error> {
        serde_json::from_slice(text.as_bytes())
    }
}

/// What a page loads from a server function.
pub type Loads<T> = Resource<Result<T, ServerFnError>, Json>;

/// `Resource::new` with the [`Json`] codec: `fetcher` runs whenever `source` changes.
#[track_caller]
pub fn load<S, T, Fut>(
    source: impl Fn() -> S + Send + Sync + 'static,
    fetcher: impl Fn(S) -> Fut + Send + Sync + 'static,
) -> Resource<T, Json>
where
    S: PartialEq + Clone + Send + Sync + 'static,
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    Resource::new_with_options(source, fetcher, false)
}

/// Renders what `resource` loaded through `children`; until then `<p class="muted">Loading...</p>`
/// (or `loading`), and on an error the error's text in an [`ErrorBox`] (`role="alert"`).
///
/// It is the error boundary of its resource: the error shows where the content would, the
/// rest of the page stays, and the content comes back once a refetch succeeds. (It matches
/// the `Result` itself rather than throwing to Leptos' `ErrorBoundary`: an error thrown
/// while server-rendering reaches the browser as a string keyed by render order, which can
/// keep the fallback after the resource recovers.) On a refetch the previous content stays
/// until the new answer is in, as in any `Transition`.
///
/// ```ignore
/// // pages/account.rs: who is signed in.
/// let me = load(|| (), |_| me());
/// view! {
///     <Loaded resource=me let:m>
///         <p>"Signed in as " <strong>{m.name}</strong></p>
///     </Loaded>
/// }
/// ```
///
/// `let:m` names the loaded value for `children`; a tuple destructures with
/// `let((env, rows))`. `children` runs again each time the resource loads.
///
/// Read a resource only inside a `Loaded` (or a `Suspense`/`Transition`): reading it outside
/// one stalls server rendering. Create resources in the page's body, never in `children`,
/// so the server and the browser number them alike when hydrating. What the page needs
/// besides the resource (the caller's roles, say) belongs in the resource's fetcher, which
/// may await other resources: `children` is not async.
#[component]
pub fn Loaded<T, F, V>(
    /// The server call, as the page created it.
    resource: Loads<T>,
    /// The text shown on the first load.
    #[prop(default = "Loading...")]
    loading: &'static str,
    /// Shows nothing on the first load: for a part that just appears once loaded.
    #[prop(optional)]
    hide_loading: bool,
    /// Shows nothing on an error: for a part that is only of use once loaded (a form), or
    /// a second view of a resource whose error another `Loaded` of the page already shows.
    #[prop(optional)]
    hide_errors: bool,
    /// The loaded value's view.
    children: F,
) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T) -> V + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let children = Arc::new(children);
    view! {
        <Transition fallback=move || (!hide_loading).then(|| view! { <p class="muted">{loading}</p> })>
            {move || {
                let children = Arc::clone(&children);
                Suspend::new(async move {
                    match resource.await {
                        Ok(value) => children(value).into_any(),
                        Err(_) if hide_errors => ().into_any(),
                        Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
                    }
                })
            }}
        </Transition>
    }
}

/// A [`Loaded`] list drawn as a [`Table`](super::Table): loading text, error, `empty`
/// message when the list is empty, otherwise the headers and one row per item from
/// `children`. The props are those of the two.
///
/// ```ignore
/// // pages/audit.rs: the audit log, newest first.
/// let events = Resource::new(move || applied.get(), list_audit);
/// view! {
///     <AsyncTable resource=events class="grid audit" testid="audit-table"
///         columns=&["#", "Time (UTC)", "Actor", "From", "Action", "Target", "Details"]
///         empty="No matching events." let:r>
///         <tr>
///             <td>{r.seq}</td>
///             // ... one cell per column
///         </tr>
///     </AsyncTable>
/// }
/// ```
#[component]
pub fn AsyncTable<T, F, V>(
    /// The server call listing the rows.
    resource: Loads<Vec<T>>,
    /// The column headers, left to right.
    columns: &'static [&'static str],
    /// Adds a last column for the rows' buttons, headed "Actions" for screen readers only.
    #[prop(optional)]
    actions: bool,
    /// Shown instead of the table when the list is empty; without it an empty table shows.
    #[prop(optional, into)]
    empty: Option<String>,
    /// The table's classes.
    #[prop(default = "grid")]
    class: &'static str,
    /// The table's `data-testid`, for the end-to-end specs.
    #[prop(optional)]
    testid: Option<&'static str>,
    /// The text shown on the first load.
    #[prop(default = "Loading...")]
    loading: &'static str,
    /// One row: the `<tr>` of `T`.
    children: F,
) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T) -> V + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let spec = TableSpec {
        columns,
        actions,
        empty,
        class,
        testid,
    };
    view! {
        <Loaded resource loading let:rows>
            {table_view(rows, &spec, &children)}
        </Loaded>
    }
}
