//! `RolloutLayer`: pins one [`RolloutSnapshot`] per request in the request extensions.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use tower_layer::Layer;
use tower_service::Service;

use crate::{CustomerResolver, EdgeConfigStore, RolloutSnapshot};

/// Computes each request's [`RolloutSnapshot`] once, from the store's current document and the
/// customer `resolver` finds, and inserts it into the request extensions (axum handlers take it
/// as `Extension<RolloutSnapshot>`).
///
/// Put it inside the service's auth middleware, which the resolver reads from. A request that
/// already carries a snapshot (the layer applied twice, e.g. on a router and a nested one)
/// keeps it: the resolver is not asked again and the config is not re-read mid-request.
pub struct RolloutLayer<R> {
    store: EdgeConfigStore,
    resolver: Arc<R>,
}

impl<R> RolloutLayer<R> {
    pub fn new(store: EdgeConfigStore, resolver: R) -> RolloutLayer<R> {
        RolloutLayer {
            store,
            resolver: Arc::new(resolver),
        }
    }
}

impl<R> Clone for RolloutLayer<R> {
    fn clone(&self) -> Self {
        RolloutLayer {
            store: self.store.clone(),
            resolver: Arc::clone(&self.resolver),
        }
    }
}

impl<R> fmt::Debug for RolloutLayer<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RolloutLayer")
            .field("version", &self.store.current().version)
            .finish_non_exhaustive()
    }
}

impl<S, R> Layer<S> for RolloutLayer<R> {
    type Service = RolloutService<S, R>;

    fn layer(&self, inner: S) -> Self::Service {
        RolloutService {
            inner,
            store: self.store.clone(),
            resolver: Arc::clone(&self.resolver),
        }
    }
}

/// The service [`RolloutLayer`] wraps around `S`.
pub struct RolloutService<S, R> {
    inner: S,
    store: EdgeConfigStore,
    resolver: Arc<R>,
}

impl<S: Clone, R> Clone for RolloutService<S, R> {
    fn clone(&self) -> Self {
        RolloutService {
            inner: self.inner.clone(),
            store: self.store.clone(),
            resolver: Arc::clone(&self.resolver),
        }
    }
}

impl<S, R, B> Service<Request<B>> for RolloutService<S, R>
where
    S: Service<Request<B>>,
    R: CustomerResolver<B>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if request.extensions().get::<RolloutSnapshot>().is_none() {
            let customer = self.resolver.resolve(&request);
            let snapshot = RolloutSnapshot::new(self.store.current(), customer);
            request.extensions_mut().insert(snapshot);
        }
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::Body;
    use axum::routing::get;
    use axum::{Extension, Router};
    use tower::{service_fn, ServiceExt};
    use vf_rolling::{find_customer_in_bucket_range, EdgeConfig, Percent};

    use crate::{Customer, CustomerExtension};

    /// `v2-cache` at 50 %.
    fn store() -> EdgeConfigStore {
        let mut config = EdgeConfig::empty();
        config.version = 1;
        config
            .rollout_mut("v2-cache")
            .set_global(Percent::new(50).unwrap(), 1_000);
        EdgeConfigStore::from_static(config)
    }

    /// A resolver reading the `x-customer` header, counting its calls.
    fn counting_resolver(
        calls: Arc<AtomicUsize>,
    ) -> impl Fn(&Request<Body>) -> Option<Customer> + Send + Sync + 'static {
        move |request: &Request<Body>| {
            calls.fetch_add(1, Ordering::SeqCst);
            let id = request.headers().get("x-customer")?.to_str().ok()?;
            Some(Customer::new(id))
        }
    }

    fn request_for(customer: &str) -> Request<Body> {
        Request::builder()
            .header("x-customer", customer)
            .body(Body::empty())
            .unwrap()
    }

    /// An inner service answering with the snapshot it was handed.
    async fn echo(request: Request<Body>) -> Result<Option<RolloutSnapshot>, Infallible> {
        Ok(request.extensions().get::<RolloutSnapshot>().cloned())
    }

    #[tokio::test]
    async fn the_customer_is_resolved_exactly_once_per_request() {
        let calls = Arc::new(AtomicUsize::new(0));
        let layer = RolloutLayer::new(store(), counting_resolver(calls.clone()));
        let service = layer.layer(service_fn(echo));
        let low = find_customer_in_bucket_range(0, 49).unwrap();

        let snapshot = service
            .clone()
            .oneshot(request_for(&low))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            snapshot.customer().map(|c| c.id.as_str()),
            Some(low.as_str())
        );
        assert!(snapshot.enabled("v2-cache"));

        service.oneshot(request_for("cus_abc123")).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_second_rollout_layer_keeps_the_snapshot_of_the_first() {
        let calls = Arc::new(AtomicUsize::new(0));
        let outer = RolloutLayer::new(store(), counting_resolver(calls.clone()));
        let inner = RolloutLayer::new(store(), counting_resolver(calls.clone()));
        let service = outer.layer(inner.layer(service_fn(echo)));
        let snapshot = service
            .oneshot(request_for("cus_1"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(snapshot.bucket(), Some(47));
    }

    #[tokio::test]
    async fn a_request_without_a_customer_gets_an_anonymous_snapshot() {
        let calls = Arc::new(AtomicUsize::new(0));
        let service = RolloutLayer::new(store(), counting_resolver(calls)).layer(service_fn(echo));
        let anonymous = Request::new(Body::empty());
        let snapshot = service.oneshot(anonymous).await.unwrap().unwrap();
        assert_eq!(snapshot.customer(), None);
        assert!(!snapshot.enabled("v2-cache"));
    }

    #[tokio::test]
    async fn axum_handlers_extract_the_snapshot_put_there_after_auth() {
        // "Auth" inserts the Customer; the rollout layer (added first, so it runs after auth)
        // reads it through CustomerExtension.
        let auth = axum::middleware::from_fn(
            |mut request: Request<Body>, next: axum::middleware::Next| async move {
                let customer = request
                    .headers()
                    .get("x-customer")
                    .and_then(|v| v.to_str().ok())
                    .map(|id| Customer::new(id).with_org("org_1"));
                if let Some(customer) = customer {
                    request.extensions_mut().insert(customer);
                }
                next.run(request).await
            },
        );
        let app = Router::new()
            .route(
                "/",
                get(
                    |Extension(snapshot): Extension<RolloutSnapshot>| async move {
                        format!(
                            "{:?} {:?} {}",
                            snapshot.org(),
                            snapshot.bucket(),
                            snapshot.enabled("v2-cache")
                        )
                    },
                ),
            )
            .layer(RolloutLayer::new(store(), CustomerExtension))
            .layer(auth);
        let response = app.oneshot(request_for("cus_1")).await.unwrap();
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], b"Some(\"org_1\") Some(47) true");
    }
}
