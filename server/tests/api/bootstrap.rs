//! Start-up bootstrap (`VF_BOOTSTRAP_ENVIRONMENT`, `VF_BOOTSTRAP_ENROLLMENT_TOKEN`).

use std::sync::Arc;

use reqwest::StatusCode;
use vf_control::{fleet, ManualClock};

use crate::helpers::{test_config, TestApp, ENVIRONMENT, T0};

#[tokio::test]
async fn starting_again_with_the_same_bootstrap_settings_keeps_one_environment_and_token() {
    let first = TestApp::spawn().await;
    let enrolled_before = first.enroll("edge-1", &[]).await;

    // A second server (a restart, or a replica) on the same database file.
    let second = vf_server::build_with_clock(
        test_config(&first.db.url),
        Arc::new(ManualClock::new(T0 + 1_000)),
    )
    .await
    .expect("a second start with the same bootstrap settings succeeds");
    let control = second.control.clone();
    let url = second.spawn();

    let environments = fleet::list_environments(&control.db).await.unwrap();
    let names: Vec<&str> = environments.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, vec![ENVIRONMENT]);
    assert_eq!(environments[0].id, first.env_id);
    let tokens = fleet::list_enrollment_tokens(&control.db, &first.env_id)
        .await
        .unwrap();
    assert_eq!(tokens.len(), 1);

    // Enrollment still works through the second server, into the same environment.
    let restarted = TestApp { url, ..first };
    let enrolled_after = restarted.enroll("edge-2", &[]).await;
    assert_eq!(
        enrolled_after.environment_id,
        enrolled_before.environment_id
    );
    assert_eq!(enrolled_after.environment_name, ENVIRONMENT);
    // The node enrolled before the restart still authenticates.
    let resp = restarted
        .get_config(&enrolled_before.node_token, None)
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
}
