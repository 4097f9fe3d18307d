//! `Table`: the `<table class="grid">` every list page draws, with its column headers and an
//! empty state, so a page writes only its rows.

use leptos::prelude::*;

/// A table of `rows` under `columns` headers, one `<tr>` per row from `children`; or, when
/// there are no rows and `empty` is given, `<p class="empty">{empty}</p>` instead.
///
/// The rows are rendered once, as given: the table is rebuilt when its parent re-renders
/// (inside a [`Loaded`](super::Loaded), whenever the resource loads again).
///
/// ```ignore
/// // The pipelines of an environment (pages/pipelines.rs).
/// view! {
///     <Table rows=pipelines testid="pipelines-table"
///         columns=&["Pipeline", "Deployed", "Node selector", "Updated"]
///         empty="No pipelines yet." let:p>
///         <tr>
///             <th scope="row"><a href=format!("/pipelines/{}", p.id)>{p.name.clone()}</a></th>
///             <td>{p.deployed_version.map(|v| format!("v{v}")).unwrap_or_default()}</td>
///             <td><LabelChips labels=p.node_selector.clone()/></td>
///             <td>{format_time(p.updated_at)}</td>
///         </tr>
///     </Table>
/// }
/// ```
///
/// renders `<p class="empty">No pipelines yet.</p>` without pipelines, otherwise
///
/// ```html
/// <table class="grid" data-testid="pipelines-table">
///   <thead><tr><th scope="col">Pipeline</th> ... <th scope="col">Updated</th></tr></thead>
///   <tbody><tr>...</tr> ...</tbody>
/// </table>
/// ```
///
/// With `actions=true` a last header `<th scope="col"><span class="sr-only">Actions</span></th>`
/// heads the rows' buttons for screen readers only.
///
/// `let:p` names one row for `children`; a tuple row destructures with `let((org, e))`.
#[component]
pub fn Table<T, F, V>(
    /// The rows, in display order.
    rows: Vec<T>,
    /// The column headers, left to right (`<th scope="col">`).
    columns: &'static [&'static str],
    /// Adds a last column for the rows' buttons, headed "Actions" for screen readers only.
    #[prop(optional)]
    actions: bool,
    /// Shown instead of the table when there are no rows; without it an empty table shows.
    #[prop(optional, into)]
    empty: Option<String>,
    /// The table's classes.
    #[prop(default = "grid")]
    class: &'static str,
    /// The table's `data-testid`, for the end-to-end specs.
    #[prop(optional)]
    testid: Option<&'static str>,
    /// One row: the `<tr>` of `T`.
    children: F,
) -> impl IntoView
where
    F: Fn(T) -> V,
    V: IntoView + 'static,
{
    table_view(
        rows,
        &TableSpec {
            columns,
            actions,
            empty,
            class,
            testid,
        },
        &children,
    )
}

/// Everything about a table but its rows: what [`Table`] and
/// [`AsyncTable`](super::AsyncTable) take besides them.
pub(super) struct TableSpec {
    pub columns: &'static [&'static str],
    pub actions: bool,
    pub empty: Option<String>,
    pub class: &'static str,
    pub testid: Option<&'static str>,
}

/// The table (or the empty message) of `rows`, each drawn by `row`.
pub(super) fn table_view<T, V, F>(rows: Vec<T>, spec: &TableSpec, row: &F) -> AnyView
where
    F: Fn(T) -> V,
    V: IntoView + 'static,
{
    if let (true, Some(message)) = (rows.is_empty(), spec.empty.clone()) {
        return view! { <p class="empty">{message}</p> }.into_any();
    }
    let headers = spec
        .columns
        .iter()
        .map(|c| view! { <th scope="col">{*c}</th> })
        .collect_view();
    let actions = spec
        .actions
        .then(|| view! { <th scope="col"><span class="sr-only">"Actions"</span></th> });
    view! {
        <table class=spec.class data-testid=spec.testid>
            <thead><tr>{headers}{actions}</tr></thead>
            <tbody>{rows.into_iter().map(row).collect_view()}</tbody>
        </table>
    }
    .into_any()
}

// Rendering to HTML needs the server side (`cargo test -p app --features ssr`; the whole
// suite's `cargo test -p server -p app` has it).
#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    fn html(view: impl IntoView) -> String {
        let owner = Owner::new();
        owner.with(|| view.to_html())
    }

    /// Drops the hydration markers (`<!>`, `<!--...-->`) to compare the elements only.
    fn elements(html: &str) -> String {
        let mut out = String::new();
        let mut rest = html;
        while let Some(start) = rest.find("<!") {
            out.push_str(&rest[..start]);
            let after = &rest[start..];
            let end = if after.starts_with("<!--") {
                after.find("-->").map(|i| i + 3)
            } else {
                after.find('>').map(|i| i + 1)
            };
            rest = &after[end.unwrap_or(after.len())..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn rows_render_under_their_headers_with_a_screen_reader_actions_column() {
        let out = html(view! {
            <Table rows=vec!["a", "b"] columns=&["Name", "State"] actions=true testid="things" let:r>
                <tr><th scope="row">{r}</th><td>"ok"</td><td/></tr>
            </Table>
        });
        assert_eq!(
            elements(&out),
            "<table data-testid=\"things\" class=\"grid\"><thead><tr>\
             <th scope=\"col\">Name</th><th scope=\"col\">State</th>\
             <th scope=\"col\"><span class=\"sr-only\">Actions</span></th></tr></thead>\
             <tbody><tr><th scope=\"row\">a</th><td>ok</td><td></td></tr>\
             <tr><th scope=\"row\">b</th><td>ok</td><td></td></tr></tbody></table>"
        );
    }

    #[test]
    fn no_rows_show_the_empty_message_when_given_and_an_empty_table_otherwise() {
        let none: Vec<&str> = Vec::new();
        let out = html(view! {
            <Table rows=none.clone() columns=&["Name"] empty="Nothing yet." let:r><tr><td>{r}</td></tr></Table>
        });
        assert_eq!(elements(&out), "<p class=\"empty\">Nothing yet.</p>");
        let out = html(view! {
            <Table rows=none columns=&["Name"] class="grid compact" let:r><tr><td>{r}</td></tr></Table>
        });
        assert_eq!(
            elements(&out),
            "<table class=\"grid compact\"><thead><tr><th scope=\"col\">Name</th></tr></thead>\
             <tbody></tbody></table>"
        );
    }
}
