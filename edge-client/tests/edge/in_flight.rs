//! A request keeps the snapshot it started with while the rollout changes under it.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::Request;
use axum::routing::get;
use axum::{Extension, Router};
use edge_client::{Customer, CustomerExtension, RolloutLayer, RolloutSnapshot};
use tokio::sync::Notify;
use tower::ServiceExt;

use crate::helpers::{customer_in, VfServer};

/// Lets the test hold a handler between its two reads of the rollout.
#[derive(Default)]
struct Gate {
    reached: Notify,
    go: Notify,
}

/// Reads `v2-cache` twice, waiting for the test in between.
async fn branch(
    State(gate): State<Arc<Gate>>,
    Extension(snapshot): Extension<RolloutSnapshot>,
) -> String {
    let before = snapshot.enabled("v2-cache");
    gate.reached.notify_one();
    gate.go.notified().await;
    let after = snapshot.enabled("v2-cache");
    format!("{before} {after} v{}", snapshot.version())
}

fn service(store: edge_client::EdgeConfigStore, gate: Arc<Gate>) -> Router {
    Router::new()
        .route("/", get(branch))
        .with_state(gate)
        .layer(RolloutLayer::new(store, CustomerExtension))
}

fn request_for(customer: &Customer) -> Request<Body> {
    let mut request = Request::new(Body::empty());
    request.extensions_mut().insert(customer.clone());
    request
}

async fn body_text(response: axum::response::Response) -> String {
    let bytes = axum::body::to_bytes(response.into_body(), 1024)
        .await
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn a_request_in_flight_keeps_its_snapshot_across_a_change() {
    let server = VfServer::start().await;
    server.set_percent("v2-cache", 0).await;
    let store = server.store().await;
    let gate = Arc::new(Gate::default());
    let app = service(store.clone(), gate.clone());
    let customer = customer_in(0, 49);

    let in_flight = tokio::spawn(app.clone().oneshot(request_for(&customer)));
    gate.reached.notified().await;

    server.set_percent("v2-cache", 100).await;
    store.refresh_now().await.unwrap();
    assert!(store
        .current()
        .enabled("v2-cache", None, edge_client::bucket(&customer.id)));

    gate.go.notify_one();
    let response = in_flight.await.unwrap().unwrap();
    assert_eq!(body_text(response).await, "false false v1");

    // The next request starts on the new document.
    gate.go.notify_one();
    let response = app.oneshot(request_for(&customer)).await.unwrap();
    assert_eq!(body_text(response).await, "true true v2");
}
