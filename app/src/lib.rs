//! VectorFlow's web application: pages and the server functions they call.
#![recursion_limit = "256"]

pub mod api;
pub mod components;
pub mod pages;
pub mod types;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

use components::Layout;
use pages::{
    edge_config::EdgeConfigPage, environments::EnvironmentsPage, fleet::FleetPage,
    groups::GroupsPage, pipeline::PipelinePage, pipelines::PipelinesPage,
};

/// The HTML document around the app (server side).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <AutoReload options=options.clone()/>
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
    view! {
        <Stylesheet id="leptos" href="/pkg/vectorflow.css"/>
        <Title text="VectorFlow"/>
        <Router>
            <Layout>
                <Routes fallback=|| view! { <h1>"Page not found"</h1> }>
                    <Route path=path!("/") view=FleetPage/>
                    <Route path=path!("/groups") view=GroupsPage/>
                    <Route path=path!("/pipelines") view=PipelinesPage/>
                    <Route path=path!("/pipelines/:id") view=PipelinePage/>
                    <Route path=path!("/environments") view=EnvironmentsPage/>
                    <Route path=path!("/admin/edge-config") view=EdgeConfigPage/>
                </Routes>
            </Layout>
        </Router>
    }
}
