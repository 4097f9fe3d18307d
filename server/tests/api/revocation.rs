//! Revoking credentials: a revoked node is refused on its very next poll and leaves the
//! fleet; a revoked enrollment token enrolls nobody. Both are audited.

use serde_json::json;
use vf_control::fleet;

use crate::helpers::{TestApp, ENROLLMENT_TOKEN};

#[tokio::test]
async fn a_revoked_node_gets_401_on_its_next_poll_and_leaves_the_fleet() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    assert_eq!(app.post_config(&node.node_token, "").await.status(), 200);

    let (status, body) = app
        .call("fleet.node.revoke", json!({ "node_id": node.node_id }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.post_config(&node.node_token, "").await.status(), 401);
    let nodes = fleet::fleet(&app.control.db, &app.env_id, app.now())
        .await
        .unwrap();
    assert!(nodes.iter().all(|n| n.node.id != node.node_id));
    let trail = vf_control::testing::audit_for_target(&app.control.db, "node", &node.node_id, 5)
        .await
        .unwrap();
    assert_eq!(trail[0].action, "node.revoke");

    let (status, _) = app
        .call("fleet.node.revoke", json!({ "node_id": node.node_id }))
        .await;
    assert_eq!(status, 409, "revoking twice is refused");
}

#[tokio::test]
async fn a_revoked_enrollment_token_enrolls_nobody_but_enrolled_nodes_keep_working() {
    let app = TestApp::spawn().await;
    let node = app.enroll("edge-1", &[]).await;
    let tokens = fleet::list_enrollment_tokens(&app.control.db, &app.env_id)
        .await
        .unwrap();
    let (status, body) = app
        .call(
            "environment.token.revoke",
            json!({ "token_id": tokens[0].id }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let refused = app
        .post_enroll(json!({ "token": ENROLLMENT_TOKEN, "hostname": "edge-2" }).to_string())
        .await;
    assert_eq!(refused.status(), 401);
    assert_eq!(app.post_config(&node.node_token, "").await.status(), 200);
    let listed = fleet::list_enrollment_tokens(&app.control.db, &app.env_id)
        .await
        .unwrap();
    assert!(listed[0].revoked_at.is_some());
}
