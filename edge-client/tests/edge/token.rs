//! The read-only token guards the document.

use edge_client::{EdgeConfig, EdgeConfigStore, PollError, Refresh};

use crate::helpers::{VfServer, TOKEN};

#[tokio::test]
async fn the_read_only_token_is_sent_and_without_it_nothing_is_served() {
    let server = VfServer::start().await;
    server.set_percent("v2-cache", 10).await;

    let without = EdgeConfigStore::start(server.options_without_token())
        .await
        .unwrap();
    assert_eq!(*without.current(), EdgeConfig::empty());
    let health = without.health();
    assert!(!health.healthy);
    assert_eq!(
        health.last_error.as_deref(),
        Some(PollError::Unauthorized.to_string().as_str())
    );
    assert_eq!(without.refresh_now().await, Err(PollError::Unauthorized));

    let wrong = EdgeConfigStore::start(
        server
            .options_without_token()
            .with_token("not-the-edge-read-token"),
    )
    .await
    .unwrap();
    assert_eq!(wrong.refresh_now().await, Err(PollError::Unauthorized));

    let with = EdgeConfigStore::start(server.options().with_token(TOKEN))
        .await
        .unwrap();
    assert!(with.health().healthy);
    assert_eq!(with.refresh_now().await, Ok(Refresh::NotModified));
    assert_eq!(with.current().resolve("v2-cache", None).percent, 10);
}
