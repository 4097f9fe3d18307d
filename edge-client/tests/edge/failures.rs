//! Errors the real server does not produce on demand (a broken document, a 500, a hang), from a
//! scripted upstream: each keeps the last good document and makes the store unhealthy.

use std::time::Duration;

use edge_client::{EdgeClientOptions, EdgeConfig, EdgeConfigStore, PollError};
use vf_rolling::Percent;

use crate::scripted::{Reply, Scripted};

/// A valid document: `v2-cache` at 100 %, version 5.
fn good_document() -> String {
    let mut config = EdgeConfig::empty();
    config.version = 5;
    config
        .rollout_mut("v2-cache")
        .set_global(Percent::FULL, 1_000);
    serde_json::to_string(&config).unwrap()
}

async fn store_of(upstream: &Scripted, timeout: Duration) -> EdgeConfigStore {
    EdgeConfigStore::start(EdgeClientOptions {
        poll_interval: Duration::from_secs(3600),
        request_timeout: timeout,
        ..EdgeClientOptions::new(upstream.url.clone())
    })
    .await
    .unwrap()
}

/// Loads the good document, then fails once with `bad`; returns the error.
async fn error_after_a_good_load(bad: Reply, timeout: Duration) -> PollError {
    let upstream = Scripted::start(vec![Reply::Document(good_document()), bad]).await;
    let store = store_of(&upstream, timeout).await;
    assert_eq!(store.current().version, 5);
    let error = store.refresh_now().await.unwrap_err();
    assert!(
        store.current().enabled("v2-cache", None, 99),
        "last good config kept"
    );
    let health = store.health();
    assert!(!health.healthy);
    assert_eq!(health.version, 5);
    assert_eq!(health.last_error, Some(error.to_string()));
    error
}

#[tokio::test]
async fn a_document_that_is_not_json_keeps_the_last_good_config() {
    let error = error_after_a_good_load(
        Reply::Document("<html>maintenance</html>".to_owned()),
        Duration::from_secs(10),
    )
    .await;
    assert!(matches!(error, PollError::BadDocument(_)), "{error}");
}

#[tokio::test]
async fn a_document_with_a_percent_over_one_hundred_is_refused_whole() {
    let broken = good_document().replace("\"percent\":100", "\"percent\":150");
    assert_ne!(broken, good_document());
    let error = error_after_a_good_load(Reply::Document(broken), Duration::from_secs(10)).await;
    assert!(error.to_string().contains("between 0 and 100"), "{error}");
}

#[tokio::test]
async fn a_server_error_keeps_the_last_good_config() {
    let error = error_after_a_good_load(Reply::Status(503), Duration::from_secs(10)).await;
    assert_eq!(error, PollError::Status(503));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_keeps_the_last_good_config() {
    let timeout = Duration::from_millis(300);
    let error = error_after_a_good_load(Reply::Silence, timeout).await;
    assert_eq!(error, PollError::Timeout(timeout));
}

#[tokio::test]
async fn a_304_to_a_request_without_an_etag_is_an_error() {
    let upstream = Scripted::start(vec![Reply::Status(304)]).await;
    let store = store_of(&upstream, Duration::from_secs(10)).await;
    assert_eq!(
        store.health().last_error,
        Some(PollError::UnexpectedNotModified.to_string())
    );
    assert_eq!(
        store.refresh_now().await,
        Err(PollError::UnexpectedNotModified)
    );
    assert_eq!(*store.current(), EdgeConfig::empty());
}
