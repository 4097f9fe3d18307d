//! Config checks before a version exists: YAML that does not parse is refused naming its
//! line and column, a config identical to the deployed or in-flight version is refused, and
//! the optional validator command refuses with its own output. Nothing is published.

use std::time::Duration;

use serde_json::json;
use vf_control::config_check::ConfigValidator;
use vf_control::testing::TestDb;

use crate::helpers::TestApp;
use crate::releases::wave;

/// `pipeline.deploy` refused with 400; returns the message.
async fn refused_deploy(app: &TestApp, pipeline_id: &str, config: &str) -> String {
    app.call_refused(
        "pipeline.deploy",
        json!({"pipeline_id": pipeline_id, "config_yaml": config, "changelog": "try"}),
        400,
    )
    .await
}

#[tokio::test]
async fn yaml_that_does_not_parse_is_refused_at_its_line_and_column_and_publishes_nothing() {
    let app = TestApp::spawn().await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    assert_eq!(
        refused_deploy(&app, &p.id, "sources:\n  in: [1, 2\n  out: 3\n").await,
        "configYaml: line 3, column 6: illegal placement of ':' indicator"
    );
    let unclosed = refused_deploy(&app, &p.id, "  : [unclosed").await;
    assert!(
        unclosed.starts_with("configYaml: line 2, column 1: "),
        "{unclosed}"
    );
    assert_eq!(
        refused_deploy(&app, &p.id, "just a sentence\n").await,
        "configYaml: line 1, column 1: the config must be a YAML mapping (sources, transforms, sinks, ...)"
    );
    // A canary is checked the same way.
    let plan = json!({"stages": [wave("a", json!([]))]});
    let refused = app
        .call_refused(
            "release.canary.create",
            json!({"pipeline_id": p.id, "config_yaml": "a: [", "rollout_plan": plan}),
            400,
        )
        .await;
    assert!(refused.starts_with("configYaml: line "), "{refused}");
    assert_eq!(app.versions(&p.id).await.len(), 1, "nothing was published");
}

#[tokio::test]
async fn a_config_identical_to_the_deployed_or_in_flight_version_is_refused() {
    let app = TestApp::spawn().await;
    app.enroll("edge-1", &[("wave", "a")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    assert_eq!(
        refused_deploy(&app, &p.id, "v: 1\n").await,
        "configYaml: identical to v1, the deployed version; change something first"
    );
    let plan = json!({"stages": [wave("a", json!([]))], "minAppliedPercent": 0});
    let create = |config: &str| json!({"pipeline_id": p.id, "config_yaml": config, "rollout_plan": plan.clone()});
    let same = app
        .call_refused("release.canary.create", create("v: 1\n"), 400)
        .await;
    assert_eq!(
        same,
        "configYaml: identical to v1, the deployed version; change something first"
    );
    app.create_release(create("v: 2\n")).await;
    let again = app
        .call_refused("release.canary.create", create("v: 2\n"), 400)
        .await;
    assert_eq!(
        again,
        "configYaml: identical to v2, the canary in flight; change something first"
    );
    assert_eq!(app.versions(&p.id).await.len(), 2);
}

#[tokio::test]
async fn the_validator_command_refuses_with_its_output_and_accepts_what_it_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("validate.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nif grep -q '^hello:' \"$1\"; then\n  echo \"x unknown component kind 'hello'\" >&2\n  exit 78\nfi\n",
    )
    .unwrap();
    let validator = ConfigValidator {
        command: format!("sh {} {{file}}", script.display()),
        timeout: Duration::from_secs(10),
    };
    let app = TestApp::spawn_with(TestDb::sqlite(), |c| c.config_validator = Some(validator)).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.call_ok(
        "pipeline.deploy",
        json!({"pipeline_id": p.id, "config_yaml": "sources: {}\n", "changelog": "ok"}),
    )
    .await;
    assert_eq!(
        refused_deploy(&app, &p.id, "hello: world\n").await,
        "configYaml: the config validator refused it (exit 78): x unknown component kind 'hello'"
    );
    app.enroll("edge-1", &[("wave", "a")]).await;
    let plan = json!({"stages": [wave("a", json!([]))]});
    let refused = app
        .call_refused(
            "release.canary.create",
            json!({"pipeline_id": p.id, "config_yaml": "hello: there\n", "rollout_plan": plan}),
            400,
        )
        .await;
    assert!(refused.contains("exit 78"), "{refused}");
    assert_eq!(app.versions(&p.id).await.len(), 1);
}
