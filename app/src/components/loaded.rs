//! `Loaded` and `AsyncTable`: what a page shows of a server call while it loads, when it
//! fails and once it answered, written once instead of a `Transition` and a `match` per page.

use std::sync::Arc;

use leptos::prelude::*;

use super::table::{table_view, TableSpec};
use super::ErrorBox;
use crate::api::error_text;

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
/// let me = Resource::new(|| (), |_| me());
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
    resource: Resource<Result<T, ServerFnError>>,
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
    resource: Resource<Result<Vec<T>, ServerFnError>>,
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
