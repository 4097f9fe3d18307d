//! Admin changes reach services through polls; unchanged documents cost a 304.

use std::sync::Arc;
use std::time::Duration;

use edge_client::{EdgeClientOptions, EdgeConfigStore, Refresh};

use crate::helpers::{customer_in, snapshot, VfServer};

#[tokio::test]
async fn a_percent_changed_through_the_admin_api_is_served_after_the_next_poll() {
    let server = VfServer::start().await;
    server.set_percent("v2-cache", 0).await;
    let store = server.store().await;
    assert_eq!(store.health().version, 1);
    let customer = customer_in(0, 49);
    assert!(!snapshot(&store, &customer).enabled("v2-cache"));
    let cached_before_the_change = server.now();
    let mut changed = store.changed();
    changed.borrow_and_update();

    server.set_percent("v2-cache", 50).await;
    // Not polled yet: still the old document.
    assert!(!snapshot(&store, &customer).enabled("v2-cache"));
    assert!(!changed.has_changed().unwrap());

    assert_eq!(
        store.refresh_now().await,
        Ok(Refresh::Updated { version: 2 })
    );
    assert!(changed.has_changed().unwrap());
    let after = snapshot(&store, &customer);
    assert!(after.enabled("v2-cache"));
    let entry = after.entry("v2-cache");
    assert_eq!((entry.previous_percent, entry.percent), (0, 50));
    assert_eq!(entry.changed_at, server.now());
    assert!(after.is_cache_stale("v2-cache", cached_before_the_change));
    assert!(!after.is_cache_stale("v2-cache", server.now()));
    // A customer above 50 did not move and keeps its cache.
    let high = snapshot(&store, &customer_in(50, 99));
    assert!(!high.enabled("v2-cache"));
    assert!(!high.is_cache_stale("v2-cache", cached_before_the_change));
    let health = store.health();
    assert!(health.healthy);
    assert_eq!(health.version, 2);
}

#[tokio::test]
async fn an_org_override_and_its_removal_reach_the_snapshot() {
    let server = VfServer::start().await;
    server.set_percent("v2-cache", 0).await;
    server.set_org_percent("v2-cache", "org_abc", 100).await;
    let store = server.store().await;
    let customer = customer_in(50, 99);
    let in_org = customer.clone().with_org("org_abc");
    let elsewhere = customer.clone().with_org("org_other");
    assert!(snapshot(&store, &in_org).enabled("v2-cache"));
    assert!(!snapshot(&store, &elsewhere).enabled("v2-cache"));
    let cached_under_the_override = server.now();

    server.remove_org("v2-cache", "org_abc").await;
    store.refresh_now().await.unwrap();
    let after = snapshot(&store, &in_org);
    assert!(!after.enabled("v2-cache"));
    assert!(after.is_cache_stale("v2-cache", cached_under_the_override));
    assert!(!after.is_cache_stale("v2-cache", server.now()));
}

#[tokio::test]
async fn an_unchanged_document_is_answered_304_and_counts_as_success() {
    let server = VfServer::start().await;
    server.set_percent("v2-cache", 30).await;
    let store = server.store().await;
    let loaded = store.current();
    assert_eq!(loaded.version, 1);
    let first_success = store.health().last_success.unwrap();

    assert_eq!(store.refresh_now().await, Ok(Refresh::NotModified));
    assert!(
        Arc::ptr_eq(&loaded, &store.current()),
        "the same document is kept"
    );
    let health = store.health();
    assert!(health.healthy);
    assert_eq!(health.version, 1);
    assert!(health.last_success.unwrap() >= first_success);

    server.set_percent("v2-cache", 40).await;
    assert_eq!(
        store.refresh_now().await,
        Ok(Refresh::Updated { version: 2 })
    );
    assert_eq!(store.current().resolve("v2-cache", None).percent, 40);
}

#[tokio::test]
async fn the_background_poller_picks_up_changes_on_its_own() {
    let server = VfServer::start().await;
    server.set_percent("v2-cache", 10).await;
    let store = EdgeConfigStore::start(EdgeClientOptions {
        poll_interval: Duration::from_millis(20),
        ..server.options()
    })
    .await
    .unwrap();
    assert_eq!(store.current().version, 1, "start does the first load");
    let mut changed = store.changed();
    let wait = Duration::from_secs(10);

    server.set_percent("v2-cache", 20).await;
    tokio::time::timeout(wait, changed.wait_for(|config| config.version == 2))
        .await
        .expect("a later poll loads the change")
        .unwrap();
    assert_eq!(store.current().resolve("v2-cache", None).percent, 20);
    assert!(store.health().healthy);
    store.shutdown().await;
}

#[tokio::test]
async fn a_weakened_etag_from_a_compressing_proxy_still_gets_a_304() {
    let server = VfServer::start().await;
    server.set_percent("v2-cache", 30).await;
    let url = format!("{}{}", server.url, edge_client::EDGE_CONFIG_PATH);
    let status = |validator: &'static str| {
        let request = server.admin.get(&url).header("if-none-match", validator);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("\"1\"").await, 304);
    assert_eq!(status("W/\"1\"").await, 304);
    assert_eq!(status("\"0\", W/\"1\"").await, 304);
    assert_eq!(status("*").await, 304);
    assert_eq!(status("W/\"0\"").await, 200);
}
