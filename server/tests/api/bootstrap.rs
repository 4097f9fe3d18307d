//! Start-up bootstrap (`VF_BOOTSTRAP_ENVIRONMENT`, `VF_BOOTSTRAP_ENROLLMENT_TOKEN`).

use reqwest::StatusCode;
use vf_control::fleet;

use crate::helpers::{TestApp, ENVIRONMENT, T0};

#[tokio::test]
async fn starting_again_with_the_same_bootstrap_settings_keeps_one_environment_and_token() {
    let first = TestApp::spawn().await;
    let enrolled_before = first.enroll("edge-1", &[]).await;

    // A restart on the same database file, with the same bootstrap settings.
    let first_env_id = first.env_id.clone();
    let restarted = first.restart_with(T0 + 1_000, |_| {}).await;
    let control = restarted.control.clone();

    let environments = fleet::list_environments(&control.db).await.unwrap();
    let names: Vec<&str> = environments.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, vec![ENVIRONMENT]);
    assert_eq!(environments[0].id, first_env_id);
    let tokens = fleet::list_enrollment_tokens(&control.db, &first_env_id)
        .await
        .unwrap();
    assert_eq!(tokens.len(), 1);

    // Enrollment still works through the restarted server, into the same environment.
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
