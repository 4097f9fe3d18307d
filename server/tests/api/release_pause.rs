//! Pause and resume: a paused release's bake clock stands still and the scheduler leaves
//! it alone; resume gives back the bake time that was left. Reasons are kept and audited.

use serde_json::json;

use crate::helpers::TestApp;
use crate::releases::{actions, details, poll_twice, two_waves_on_v1, wave};

#[tokio::test]
async fn a_paused_release_keeps_its_bake_time_and_the_scheduler_leaves_it_alone() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let gates =
        json!([{"healthWindow": {}}, {"errorRate": {"maxPercent": 5, "intervalSeconds": 10}}]);
    let (id, created) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates)]},
        }))
        .await;
    let deadline = created["bake_deadline"].as_i64().unwrap();
    poll_twice(&mut [&mut a, &mut b]).await;
    app.clock.advance_ms(10_000);
    let paused = app
        .call_ok(
            "release.canary.pause",
            json!({"release_id": id, "reason": "  waiting for the DB migration  "}),
        )
        .await;
    assert_eq!(paused["paused"]["by"], "token:bootstrap");
    assert_eq!(paused["paused"]["reason"], "waiting for the DB migration");
    assert_eq!(paused["paused"]["bakeLeftMs"], 20_000);
    assert_eq!(paused["allowed_actions"], json!(["resume", "rollback"]));

    // Long past the deadline: no check, no decision, and advance is refused.
    assert!(app.tick_after(10 * 60_000).await.is_empty());
    let refused = app
        .call_refused("release.canary.advance", json!({"release_id": id}), 409)
        .await;
    assert_eq!(refused, "the release is paused; resume it first");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "CANARY_DEPLOYED");
    assert_eq!(
        r["stages"][0]["checks"],
        json!([]),
        "nothing was checked while paused"
    );

    // Resume gives back the 20 s that were left.
    let resumed = app
        .call_ok("release.canary.resume", json!({"release_id": id}))
        .await;
    assert_eq!(resumed["paused"], serde_json::Value::Null);
    let new_deadline = resumed["bake_deadline"].as_i64().unwrap();
    assert_eq!(new_deadline, app.now() + 20_000);
    assert!(new_deadline > deadline);
    assert!(app.tick_after(19_000).await.is_empty());
    assert_eq!(app.decide_after(1_000).await, "advance");

    let log = app.release_audit(&id).await;
    assert_eq!(
        actions(&log),
        [
            "release.create",
            "release.pause",
            "release.resume",
            "release.advance"
        ]
    );
    assert_eq!(
        details(&log[1])["operatorReason"],
        "waiting for the DB migration"
    );
    let r = app.release(&id).await;
    assert_eq!(r["notes"][0]["action"], "pause");
    assert_eq!(r["notes"][0]["reason"], "waiting for the DB migration");
}

#[tokio::test]
async fn a_paused_release_rolls_back_with_its_reason_and_reasons_are_bounded() {
    let app = TestApp::spawn().await;
    let (_a, _b, p) = two_waves_on_v1(&app).await;
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", json!([])), wave("b", json!([]))]},
        }))
        .await;
    app.call_ok("release.canary.pause", json!({"release_id": id}))
        .await;
    let too_long = "x".repeat(501);
    let refused = app
        .call_refused(
            "release.canary.rollback",
            json!({"release_id": id, "reason": too_long}),
            400,
        )
        .await;
    assert_eq!(refused, "reason: at most 500 characters");
    let rolled = app
        .call_ok(
            "release.canary.rollback",
            json!({"release_id": id, "reason": "customer escalation"}),
        )
        .await;
    assert_eq!(rolled["status"], "ROLLED_BACK");
    assert_eq!(rolled["paused"], serde_json::Value::Null);
    assert_eq!(
        rolled["failure_reason"],
        "rolled back by token:bootstrap: customer escalation"
    );
    let log = app.release_audit(&id).await;
    let last = log.last().unwrap();
    assert_eq!(last.action, "release.rollback");
    assert_eq!(details(last)["operatorReason"], "customer escalation");
}

#[tokio::test]
async fn complete_all_remaining_keeps_its_reason_on_the_release_and_in_the_audit() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", json!([])), wave("b", json!([]))]},
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;
    let done = app
        .call_ok(
            "release.canary.complete",
            json!({"release_id": id, "reason": "approved by the on-call lead"}),
        )
        .await;
    assert_eq!(done["status"], "BROADENED");
    assert_eq!(done["notes"][0]["action"], "complete");
    assert_eq!(done["notes"][0]["reason"], "approved by the on-call lead");
    let log = app.release_audit(&id).await;
    let last = log.last().unwrap();
    assert_eq!(last.action, "release.complete");
    assert_eq!(
        details(last)["operatorReason"],
        "approved by the on-call lead"
    );
}

#[tokio::test]
async fn the_release_diff_shows_what_the_canary_changes_against_the_previous_version() {
    let app = TestApp::spawn().await;
    let (_a, _b, p) = two_waves_on_v1(&app).await;
    let none = app
        .call_ok("pipeline.release_diff", json!({"pipeline_id": p.id}))
        .await;
    assert_eq!(none, serde_json::Value::Null);
    app.create_release(json!({
        "pipeline_id": p.id,
        "config_yaml": "v: 2\n",
        "rollout_plan": {"stages": [wave("a", json!([])), wave("b", json!([]))]},
    }))
    .await;
    let diff = app
        .call_ok("pipeline.release_diff", json!({"pipeline_id": p.id}))
        .await;
    assert_eq!(diff["from"], 1);
    assert_eq!(diff["to"], 2);
    assert_eq!(
        diff["lines"],
        json!([{"op": "-", "text": "v: 1"}, {"op": "+", "text": "v: 2"}])
    );
}

#[tokio::test]
async fn the_rollout_card_charts_the_latest_releases_stages() {
    let app = TestApp::spawn().await;
    let (_a, _b, p) = two_waves_on_v1(&app).await;
    let none = app
        .call_ok("pipeline.release_series", json!({"pipeline_id": p.id}))
        .await;
    assert_eq!(none, serde_json::Value::Null);
    let (release_id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", json!([])), wave("b", json!([]))]},
        }))
        .await;
    let charts = app
        .call_ok("pipeline.release_series", json!({"pipeline_id": p.id}))
        .await;
    assert_eq!(charts["release_id"], release_id);
    // The first stage is open (no metrics yet); the second has not opened.
    assert_eq!(charts["stages"], json!([{"index": 0, "points": []}]));
}
