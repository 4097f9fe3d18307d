//! The server goes away and comes back: the store keeps its last good document meanwhile.

use edge_client::{EdgeConfig, PollError, Refresh};

use crate::helpers::{customer_in, snapshot, VfServer};

#[tokio::test]
async fn a_server_outage_keeps_the_last_good_config_and_health_recovers_when_it_is_back() {
    let mut server = VfServer::start().await;
    server.set_percent("v2-cache", 100).await;
    let store = server.store().await;
    let customer = customer_in(0, 99);
    assert!(snapshot(&store, &customer).enabled("v2-cache"));
    let last_success = store.health().last_success;

    server.stop().await;
    let error = store.refresh_now().await.unwrap_err();
    assert!(matches!(error, PollError::Unreachable(_)), "{error}");
    assert!(
        snapshot(&store, &customer).enabled("v2-cache"),
        "last good config kept"
    );
    let health = store.health();
    assert!(!health.healthy);
    assert_eq!(health.version, 1);
    assert_eq!(health.last_success, last_success);
    assert_eq!(health.consecutive_failures, 1);
    assert!(health.last_error.unwrap().contains("unreachable"));

    server.restart().await;
    assert_eq!(store.refresh_now().await, Ok(Refresh::NotModified));
    let health = store.health();
    assert!(health.healthy);
    assert_eq!(health.last_error, None);
    assert_eq!(health.consecutive_failures, 0);
    assert!(health.last_success > last_success);
}

#[tokio::test]
async fn a_store_started_while_the_server_is_down_serves_every_rollout_off_until_it_is_up() {
    let mut server = VfServer::start().await;
    server.set_percent("v2-cache", 100).await;
    server.stop().await;

    let store = server.store().await;
    assert_eq!(*store.current(), EdgeConfig::empty());
    assert!(!snapshot(&store, &customer_in(0, 99)).enabled("v2-cache"));
    let health = store.health();
    assert!(!health.healthy);
    assert_eq!(health.last_success, None);

    server.restart().await;
    assert_eq!(
        store.refresh_now().await,
        Ok(Refresh::Updated { version: 1 })
    );
    assert!(snapshot(&store, &customer_in(0, 99)).enabled("v2-cache"));
    assert!(store.health().healthy);
}

#[tokio::test]
async fn a_server_that_lost_its_database_cannot_roll_customers_back() {
    let mut server = VfServer::start().await;
    server.set_percent("v2-cache", 100).await;
    server.set_percent("v2-cache", 100).await;
    let store = server.store().await;
    assert_eq!(store.current().version, 2);

    // Back on an empty database, at version 1 of a different document.
    server.restart_on_a_fresh_database().await;
    server.set_percent("other", 5).await;
    let error = store.refresh_now().await.unwrap_err();
    assert_eq!(error, PollError::OlderVersion { got: 1, serving: 2 });
    assert!(snapshot(&store, &customer_in(0, 99)).enabled("v2-cache"));
    let health = store.health();
    assert!(!health.healthy);
    assert_eq!(health.version, 2);
}
