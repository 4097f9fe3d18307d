//! What `release.canary.create`, `pipeline.deploy` and the operator actions refuse, with the
//! status and the field or gate named, and that a refused call changes nothing.

use serde_json::{json, Value};
use vf_control::fleet;

use crate::helpers::{labels, operator, TestApp, OPERATOR};
use crate::releases::{
    actions, details, poll_all, poll_twice, served, stage, two_waves_on_v1, wave, BAD_CONFIG,
};

/// What a refused call must leave alone: every version, every release, the deployed version.
async fn state(app: &TestApp, pipeline_id: &str) -> (Vec<(i64, String)>, Value, Option<i64>) {
    let releases = app
        .call_ok("release.list", json!({ "pipeline_id": pipeline_id }))
        .await;
    (
        app.versions(pipeline_id).await,
        releases,
        app.deployed_version(pipeline_id).await,
    )
}

/// A pipeline at v1 with one agent running it.
async fn deployed_pipeline(app: &TestApp) -> (String, vf_agent::Agent) {
    let mut agent = app.start_agent("edge", &[("wave", "a")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut agent]).await;
    assert_eq!(served(&[&agent], &p.id), [Some(1)]);
    (p.id, agent)
}

/// Creates a release with `plan`; it must be refused with `status` and a message containing
/// `expected`. Nothing changes, and the agent is still served v1.
async fn refused_create(app: &TestApp, plan: Value, status: u16, expected: &str) {
    let (pipeline_id, mut agent) = deployed_pipeline(app).await;
    let before = state(app, &pipeline_id).await;
    let message = app
        .call_refused(
            "release.canary.create",
            json!({"pipeline_id": pipeline_id, "config_yaml": "v: 2\n", "rollout_plan": plan}),
            status,
        )
        .await;
    assert!(message.contains(expected), "{message}");
    assert_eq!(state(app, &pipeline_id).await, before);
    assert_eq!(before.1, json!([]));
    poll_all(&mut [&mut agent]).await;
    assert_eq!(served(&[&agent], &pipeline_id), [Some(1)]);
}

#[tokio::test]
async fn a_plan_with_a_ten_second_bake_is_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    let plan =
        json!({"stages": [{"selector": {"percentage": 50}, "bakeSeconds": 10, "gates": []}]});
    refused_create(&app, plan, 400, "rolloutPlan.stages[0].bakeSeconds").await;
}

#[tokio::test]
async fn a_promql_gate_is_refused_naming_the_gate_when_no_prometheus_is_configured() {
    let app = TestApp::spawn().await;
    let promql = json!({"customPromQL": {"query": "up", "comparator": "lt", "threshold": 1}});
    let plan = json!({"stages": [wave("a", json!([{"healthWindow": {}}, promql]))]});
    refused_create(
        &app,
        plan,
        400,
        "rolloutPlan.stages[0].gates[1].customPromQL",
    )
    .await;
}

#[tokio::test]
async fn a_node_group_of_another_environment_is_refused_naming_the_selector() {
    let app = TestApp::spawn().await;
    let other = fleet::create_environment(&app.control.db, &operator(), "other", app.now())
        .await
        .unwrap();
    let group = fleet::create_node_group(
        &app.control.db,
        &operator(),
        &other.id,
        "everyone",
        labels(&[]),
        app.now(),
    )
    .await
    .unwrap();
    let plan = json!({"stages": [stage(json!({"nodeGroup": group.id}), json!([]))]});
    refused_create(&app, plan, 400, "rolloutPlan.stages[0].selector.nodeGroup").await;
}

#[tokio::test]
async fn a_second_release_and_a_direct_deploy_are_refused_while_one_is_in_flight() {
    let app = TestApp::spawn().await;
    let (pipeline_id, mut agent) = deployed_pipeline(&app).await;
    let plan = json!({"stages": [wave("a", json!([]))]});
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": pipeline_id, "config_yaml": "v: 2\n", "rollout_plan": plan,
        }))
        .await;
    poll_all(&mut [&mut agent]).await;
    assert_eq!(served(&[&agent], &pipeline_id), [Some(2)]);
    let before = state(&app, &pipeline_id).await;

    let second = app
        .call_refused(
            "release.canary.create",
            json!({"pipeline_id": pipeline_id, "config_yaml": "v: 3\n", "rollout_plan": plan}),
            409,
        )
        .await;
    assert!(second.contains("in flight"), "{second}");
    let planless = app
        .call_refused(
            "release.canary.create",
            json!({
                "pipeline_id": pipeline_id, "config_yaml": "v: 3\n",
                "canary_selector": {"percentage": 50}, "health_check_window_minutes": 1,
            }),
            409,
        )
        .await;
    assert!(planless.contains("in flight"), "{planless}");
    let deploy = app
        .call_refused(
            "pipeline.deploy",
            json!({"pipeline_id": pipeline_id, "config_yaml": "v: 3\n", "changelog": "hotfix"}),
            409,
        )
        .await;
    assert!(deploy.contains("in flight"), "{deploy}");

    assert_eq!(state(&app, &pipeline_id).await, before);
    poll_all(&mut [&mut agent]).await;
    assert_eq!(served(&[&agent], &pipeline_id), [Some(2)]);
    // The release itself is untouched: only its creation is in the audit log.
    assert_eq!(actions(&app.release_audit(&id).await), ["release.create"]);
}

#[tokio::test]
async fn a_manual_advance_refused_by_a_failing_gate_changes_nothing_and_never_rolls_back() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;

    // autoRollbackOnGateFail is on (the default): only the scheduler may roll back.
    let gates = json!([{"errorRate": {"maxPercent": 5}}]);
    let (id, created) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": BAD_CONFIG,
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates)]},
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);
    app.clock.advance_ms(10_000);
    let before = state(&app, &p.id).await;

    for action in ["advance", "complete"] {
        let message = app
            .call_refused(
                &format!("release.canary.{action}"),
                json!({ "release_id": id }),
                409,
            )
            .await;
        assert!(message.contains("errorRate gate failed"), "{message}");
        assert!(message.contains("50.00%"), "{message}");
    }

    let r = app.release(&id).await;
    assert_eq!(r["status"], "CANARY_DEPLOYED");
    assert_eq!(r["current_stage"], 0);
    assert_eq!(r["bake_deadline"], created["bake_deadline"]);
    assert_eq!(r["failure_reason"], Value::Null);
    assert_eq!(r["stages"].as_array().unwrap().len(), 1);
    assert_eq!(r["stages"][0]["outcome"], Value::Null);
    // The refusals are kept as attempts; the stage's evidence stays untouched.
    assert_eq!(r["stages"][0]["evaluations"], json!([]));
    for (i, action) in ["advance", "complete"].into_iter().enumerate() {
        let attempt = &r["stages"][0]["refused"][i];
        assert_eq!(attempt["action"], action);
        assert_eq!(attempt["actor"], OPERATOR);
        assert_eq!(attempt["gate"], "errorRate");
        assert!(
            attempt["reason"].as_str().unwrap().contains("50.00%"),
            "{attempt}"
        );
    }
    assert_eq!(state(&app, &p.id).await.0, before.0, "no version published");
    assert_eq!(app.deployed_version(&p.id).await, Some(1));
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);
    let log = app.release_audit(&id).await;
    assert_eq!(
        actions(&log),
        ["release.create", "release.refused", "release.refused"]
    );
    assert!(
        details(&log[1])["reason"]
            .as_str()
            .unwrap()
            .starts_with("errorRate gate failed"),
        "{}",
        details(&log[1])
    );

    // The refusals did not move the deadline: the scheduler decides on time, and it rolls back.
    assert!(app.tick_after(10_000).await.is_empty());
    assert_eq!(app.decide_after(10_000).await, "rollback");
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(3), Some(3)]);
}

#[tokio::test]
async fn actions_on_an_unknown_release_are_404_and_on_a_finished_one_409() {
    let app = TestApp::spawn().await;
    let (pipeline_id, mut agent) = deployed_pipeline(&app).await;
    let unknown = json!({ "release_id": "00000000-0000-0000-0000-000000000000" });
    for endpoint in ["get", "advance", "complete", "rollback"] {
        let message = app
            .call_refused(&format!("release.canary.{endpoint}"), unknown.clone(), 404)
            .await;
        assert!(message.contains("not found"), "{message}");
    }

    let plan = json!({"stages": [wave("a", json!([]))]});
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": pipeline_id, "config_yaml": "v: 2\n", "rollout_plan": plan,
        }))
        .await;
    poll_twice(&mut [&mut agent]).await;
    app.press("complete", &id).await;
    poll_all(&mut [&mut agent]).await;
    assert_eq!(served(&[&agent], &pipeline_id), [Some(2)]);
    let before = state(&app, &pipeline_id).await;
    for action in ["advance", "complete", "rollback"] {
        let message = app
            .call_refused(
                &format!("release.canary.{action}"),
                json!({ "release_id": id }),
                409,
            )
            .await;
        assert_eq!(message, "release is already complete");
    }
    assert_eq!(state(&app, &pipeline_id).await, before);
    assert!(app.tick_after(60_000).await.is_empty());
    poll_all(&mut [&mut agent]).await;
    assert_eq!(served(&[&agent], &pipeline_id), [Some(2)]);
}
