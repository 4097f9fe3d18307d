//! VectorFlow's web application: pages and the server functions they call.
#![recursion_limit = "256"]

pub mod api;
pub mod components;
pub mod pages;
pub mod preview;
pub mod types;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, HashedStylesheet, MetaTags, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

use components::Layout;
use pages::{
    edge_config::EdgeConfigPage,
    environments::EnvironmentsPage,
    fleet::FleetPage,
    groups::GroupsPage,
    pipeline::PipelinePage,
    pipelines::PipelinesPage,
    signin::{SetupPage, SignInPage},
    users::UsersPage,
};

/// The Content-Security-Policy of every page: scripts only from this origin or carrying the
/// page's nonce (the hydration script), WebAssembly allowed to compile, no framing.
pub fn content_security_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self' ws://127.0.0.1:*; \
         object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )
}

/// The HTML document around the app (server side).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let (Some(nonce), Some(resp)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) {
        if let Ok(value) = axum::http::HeaderValue::from_str(&content_security_policy(&nonce)) {
            resp.insert_header(axum::http::header::CONTENT_SECURITY_POLICY, value);
        }
    }
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <AutoReload options=options.clone()/>
                <HashedStylesheet options=options.clone() id="leptos"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Effects run only in the browser, once the page hydrated: mark the page as started, which
    // hides the notice below (and tells end-to-end tests the buttons work).
    Effect::new(|_| {
        #[cfg(feature = "hydrate")]
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Title text="VectorFlow"/>
        // Shown by the stylesheet only when the page has not started in the browser 10 s after
        // loading (the bundle missing or failing): otherwise the page looks normal and every
        // button is dead.
        <div class="app-not-started" role="alert">
            "This page could not start in your browser, so its buttons do not work. Reload it; if this stays, the app's bundle (/pkg/vectorflow.wasm) did not load."
        </div>
        <Router>
            <Layout>
                <Routes fallback=|| view! { <h1>"Page not found"</h1> }>
                    <Route path=path!("/") view=FleetPage/>
                    <Route path=path!("/groups") view=GroupsPage/>
                    <Route path=path!("/pipelines") view=PipelinesPage/>
                    <Route path=path!("/pipelines/:id") view=PipelinePage/>
                    <Route path=path!("/nodes/:id") view=pages::node::NodePage/>
                    <Route path=path!("/environments") view=EnvironmentsPage/>
                    <Route path=path!("/webhooks") view=pages::webhooks::WebhooksPage/>
                    <Route path=path!("/admin/edge-config") view=EdgeConfigPage/>
                    <Route path=path!("/audit") view=pages::audit::AuditPage/>
                    <Route path=path!("/users") view=UsersPage/>
                    <Route path=path!("/account") view=pages::account::AccountPage/>
                    <Route path=path!("/signin") view=SignInPage/>
                    <Route path=path!("/setup") view=SetupPage/>
                </Routes>
            </Layout>
        </Router>
    }
}
