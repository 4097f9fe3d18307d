//! `EdgeConfigStore`: the last good edge config, shared by every request of a service, kept
//! fresh by a background poller.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use vf_rolling::EdgeConfig;

use crate::poll::{self, Fetched, Source};
use crate::{EdgeClientOptions, Health, PollError, StartError};

/// The edge config a service routes by, and whether it is current.
///
/// Cheap to clone (one `Arc`); all clones share one document and one poller. The poller stops
/// when [`EdgeConfigStore::shutdown`] is called or the last clone is dropped.
#[derive(Clone)]
pub struct EdgeConfigStore {
    shared: Arc<Shared>,
}

/// What a successful poll did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// A new document is being served.
    Updated { version: i64 },
    /// The server sent the document already being served.
    Unchanged { version: i64 },
    /// The server answered `304 Not Modified` (or the store is static).
    NotModified,
}

/// State behind every clone of a store (and, weakly, its poller).
pub(crate) struct Shared {
    /// The document; `current()` clones the `Arc` out, `changed()` subscribes.
    config: watch::Sender<Arc<EdgeConfig>>,
    health: Mutex<Health>,
    /// `None` for a static store.
    source: Option<Source>,
    /// ETag of the served document. Also serializes polls, so an older answer can never
    /// overwrite a newer one.
    etag: tokio::sync::Mutex<Option<String>>,
    /// Turns true on shutdown; dropped with the store, which also stops the poller.
    stop: watch::Sender<bool>,
    poller: Mutex<Option<JoinHandle<()>>>,
}

impl EdgeConfigStore {
    /// Loads the document once, then polls `options.url` every `options.poll_interval` in the
    /// background. Returns after that first poll whether it worked or not (it takes at most
    /// `options.request_timeout`), so a service has its rollouts before it serves; if it
    /// failed, the store serves [`EdgeConfig::empty`] (every rollout off) and reports itself
    /// unhealthy until a poll succeeds.
    ///
    /// Must be called inside a tokio runtime.
    pub async fn start(options: EdgeClientOptions) -> Result<EdgeConfigStore, StartError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        let source = Source::new(&options)?;
        let store = EdgeConfigStore::new(EdgeConfig::empty(), Health::not_loaded(), Some(source));
        // A failure is recorded in the store's health; the store still starts.
        let _ = store.shared.poll_once().await;
        let stop = store.shared.stop.subscribe();
        let poller = poll::run(Arc::downgrade(&store.shared), options.poll_interval, stop);
        *lock(&store.shared.poller) = Some(runtime.spawn(poller));
        Ok(store)
    }

    /// A store that always serves `config` and never polls, for unit tests of services.
    /// It reports itself healthy; [`EdgeConfigStore::refresh_now`] returns `NotModified`.
    pub fn from_static(config: EdgeConfig) -> EdgeConfigStore {
        let mut health = Health::not_loaded();
        health.record_success(SystemTime::now(), config.version);
        EdgeConfigStore::new(config, health, None)
    }

    fn new(config: EdgeConfig, health: Health, source: Option<Source>) -> EdgeConfigStore {
        EdgeConfigStore {
            shared: Arc::new(Shared {
                config: watch::Sender::new(Arc::new(config)),
                health: Mutex::new(health),
                source,
                etag: tokio::sync::Mutex::new(None),
                stop: watch::Sender::new(false),
                poller: Mutex::new(None),
            }),
        }
    }

    /// The document being served. Pin it for a whole request (the layer does this) rather
    /// than calling this at each branch point.
    pub fn current(&self) -> Arc<EdgeConfig> {
        self.shared.config.borrow().clone()
    }

    /// Whether the last poll worked, when one last did, and which version is served.
    pub fn health(&self) -> Health {
        lock(&self.shared.health).clone()
    }

    /// Polls once now (start-up, tests). Polls never overlap: this waits for one in flight.
    /// On error the served document stays as it was and the store reports itself unhealthy.
    pub async fn refresh_now(&self) -> Result<Refresh, PollError> {
        self.shared.poll_once().await
    }

    /// A receiver that wakes whenever a new document is served (`changed().await`).
    pub fn changed(&self) -> watch::Receiver<Arc<EdgeConfig>> {
        self.shared.config.subscribe()
    }

    /// Stops the poller and waits until it has stopped; the store keeps serving its last
    /// document. Dropping the last clone of the store stops the poller too, without waiting.
    pub async fn shutdown(&self) {
        self.shared.stop.send_replace(true);
        let poller = lock(&self.shared.poller).take();
        if let Some(poller) = poller {
            // A poller that panicked has stopped as well.
            let _ = poller.await;
        }
    }

    /// Serves `config` as if a poll had returned it (tests of this crate).
    #[cfg(test)]
    pub(crate) fn install(&self, config: EdgeConfig) {
        self.shared.config.send_replace(Arc::new(config));
    }

    /// The poller task's handle, to see whether it stopped (tests of this crate).
    #[cfg(test)]
    pub(crate) fn poller_abort_handle(&self) -> Option<tokio::task::AbortHandle> {
        lock(&self.shared.poller)
            .as_ref()
            .map(JoinHandle::abort_handle)
    }
}

impl Shared {
    /// The poll step: fetch, then serve the new document or record why not.
    pub(crate) async fn poll_once(&self) -> Result<Refresh, PollError> {
        let Some(source) = &self.source else {
            return Ok(Refresh::NotModified);
        };
        let mut etag = self.etag.lock().await;
        let outcome = match source.fetch(etag.as_deref()).await {
            Ok(Fetched::NotModified) => Ok(Refresh::NotModified),
            Ok(Fetched::Document { config, etag: tag }) => self.serve(config).inspect(|_| {
                *etag = tag;
            }),
            Err(error) => Err(error),
        };
        let mut health = lock(&self.health);
        match &outcome {
            Ok(_) => health.record_success(SystemTime::now(), self.config.borrow().version),
            Err(error) => {
                tracing::warn!(%error, serving = health.version, "edge config poll failed");
                health.record_failure(error.to_string());
            }
        }
        outcome
    }

    /// Serves `config` unless it is older than the served one.
    fn serve(&self, config: EdgeConfig) -> Result<Refresh, PollError> {
        let serving = self.config.borrow().version;
        if config.version < serving {
            return Err(PollError::OlderVersion {
                got: config.version,
                serving,
            });
        }
        let version = config.version;
        let updated = self.config.send_if_modified(|current| {
            if **current == config {
                return false;
            }
            *current = Arc::new(config);
            true
        });
        Ok(if updated {
            Refresh::Updated { version }
        } else {
            Refresh::Unchanged { version }
        })
    }
}

/// Locks a std mutex; a panic elsewhere while holding it left plain data, still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::time::Duration;

    /// A URL nothing listens on: bind a port, then free it.
    fn closed_port_url() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        format!("http://{addr}/api/edge-config")
    }

    fn hourly(url: String) -> EdgeClientOptions {
        EdgeClientOptions {
            poll_interval: Duration::from_secs(3600),
            ..EdgeClientOptions::new(url)
        }
    }

    /// Lets the runtime run other tasks until `done` holds (bounded; no sleeping).
    async fn yield_until(done: impl Fn() -> bool) -> bool {
        for _ in 0..10_000 {
            if done() {
                return true;
            }
            tokio::task::yield_now().await;
        }
        done()
    }

    #[test]
    fn starting_outside_a_tokio_runtime_is_refused() {
        let start = std::pin::pin!(EdgeConfigStore::start(hourly(closed_port_url())));
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        match start.poll(&mut context) {
            std::task::Poll::Ready(Err(StartError::NoRuntime)) => {}
            _ => panic!("expected NoRuntime"),
        }
    }

    #[tokio::test]
    async fn a_store_that_never_loaded_serves_the_empty_config_and_is_unhealthy() {
        let store = EdgeConfigStore::start(hourly(closed_port_url()))
            .await
            .unwrap();
        assert_eq!(*store.current(), EdgeConfig::empty());
        let health = store.health();
        assert!(!health.healthy);
        assert_eq!(health.last_success, None);
        assert_eq!(health.version, 0);
        assert_eq!(health.consecutive_failures, 1);
        assert!(health.last_error.unwrap().contains("unreachable"));
        let error = store.refresh_now().await.unwrap_err();
        assert!(matches!(error, PollError::Unreachable(_)), "{error}");
        assert_eq!(store.health().consecutive_failures, 2);
    }

    #[tokio::test]
    async fn store_futures_can_run_on_any_tokio_worker() {
        fn send<T: Send>(_: &T) {}
        let store = EdgeConfigStore::from_static(EdgeConfig::empty());
        send(&EdgeConfigStore::start(hourly(closed_port_url())));
        send(&store.refresh_now());
        send(&store.shutdown());
    }

    #[tokio::test]
    async fn a_static_store_serves_its_config_and_reports_healthy() {
        let mut config = EdgeConfig::empty();
        config.version = 9;
        let store = EdgeConfigStore::from_static(config.clone());
        assert_eq!(*store.current(), config);
        assert_eq!(store.refresh_now().await, Ok(Refresh::NotModified));
        let health = store.health();
        assert!(health.healthy);
        assert_eq!(health.version, 9);
        assert!(store.poller_abort_handle().is_none());
    }

    #[tokio::test]
    async fn shutdown_returns_once_the_poller_has_stopped() {
        let store = EdgeConfigStore::start(hourly(closed_port_url()))
            .await
            .unwrap();
        let poller = store.poller_abort_handle().unwrap();
        assert!(!poller.is_finished());
        store.shutdown().await;
        assert!(poller.is_finished());
        // Still serving, still pollable by hand.
        assert_eq!(*store.current(), EdgeConfig::empty());
        assert!(store.refresh_now().await.is_err());
    }

    #[tokio::test]
    async fn dropping_the_last_clone_stops_the_poller() {
        let store = EdgeConfigStore::start(hourly(closed_port_url()))
            .await
            .unwrap();
        let poller = store.poller_abort_handle().unwrap();
        let clone = store.clone();
        drop(store);
        tokio::task::yield_now().await;
        assert!(!poller.is_finished(), "a clone still holds the store");
        drop(clone);
        assert!(yield_until(|| poller.is_finished()).await);
    }

    #[tokio::test]
    async fn subscribers_are_told_about_a_new_document() {
        let store = EdgeConfigStore::from_static(EdgeConfig::empty());
        let mut changed = store.changed();
        let mut next = EdgeConfig::empty();
        next.version = 2;
        store.install(next);
        changed.changed().await.unwrap();
        assert_eq!(changed.borrow_and_update().version, 2);
    }
}
