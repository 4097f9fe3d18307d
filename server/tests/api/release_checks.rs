//! Gates checked during the bake: a failing signal gate stops the canary at its next check
//! instead of at the deadline, `failureLimit` counts consecutive failing checks, checks
//! without data never fail a gate, and `onNoData` decides at the deadline.

use serde_json::{json, Value};
use vf_control::releases::{self, Ticked};

use crate::helpers::TestApp;
use crate::releases::{poll_all, poll_twice, results, served, two_waves_on_v1, wave, BAD_CONFIG};

/// A two-wave plan whose first stage bakes an hour with `gates`.
fn hour_long_first_stage(gates: Value) -> Value {
    let mut plan = json!({"stages": [wave("a", gates.clone()), wave("b", gates)]});
    plan["stages"][0]["bakeSeconds"] = json!(3600);
    plan
}

/// A release of [`BAD_CONFIG`] (half its events are errors) by `plan`.
async fn bad_canary(app: &TestApp, pipeline_id: &str, plan: Value) -> (String, Value) {
    app.create_release(json!({
        "pipeline_id": pipeline_id,
        "config_yaml": BAD_CONFIG,
        "rollout_plan": plan,
    }))
    .await
}

/// The verdicts of the checks of the first checked gate of a stage, oldest first.
fn check_verdicts(release: &Value, stage: usize) -> Vec<String> {
    let series = release["stages"][stage]["checks"][0]["series"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks: {}", release["stages"][stage]));
    series
        .iter()
        .map(|check| check[2].as_str().unwrap().to_string())
        .collect()
}

async fn a_failing_gate_rolls_back_at_its_first_check_long_before_the_deadline(app: TestApp) {
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let gates = json!([
        {"healthWindow": {}},
        {"errorRate": {"maxPercent": 5, "intervalSeconds": 10}},
    ]);
    let (id, created) = bad_canary(&app, &p.id, hour_long_first_stage(gates)).await;
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);

    assert!(
        app.tick_after(9_000).await.is_empty(),
        "no check is due yet"
    );
    assert_eq!(app.decide_after(1_000).await, "rollback");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "ROLLED_BACK");
    assert!(app.now() + 3_000_000 < created["bake_deadline"].as_i64().unwrap());
    let failure = r["failure_reason"].as_str().unwrap();
    assert!(
        failure.starts_with(
            "stage 1 failed during its bake: errorRate: error rate 50.00% exceeds max 5.00%"
        ),
        "{failure}"
    );
    assert!(failure.contains("most errors: wave-a"), "{failure}");
    let evaluation = &r["stages"][0]["evaluations"][0];
    assert_eq!(evaluation["trigger"], "scheduler");
    assert_eq!(evaluation["decision"], "rollback");
    assert_eq!(results(&r, 0, 0)[0]["gate"], "errorRate");
    assert_eq!(results(&r, 0, 0)[0]["observed"], 50.0);
    assert_eq!(check_verdicts(&r, 0), ["fail"]);
    assert_eq!(r["stages"][0]["checks"][0]["last"]["observed"], 50.0);

    // The rollback reaches the canary node at its next poll.
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(3), Some(3)]);
}

#[tokio::test]
async fn a_failing_gate_rolls_back_at_its_first_check_long_before_the_deadline_on_sqlite() {
    a_failing_gate_rolls_back_at_its_first_check_long_before_the_deadline(TestApp::spawn().await)
        .await;
}

#[tokio::test]
async fn a_failing_gate_rolls_back_at_its_first_check_long_before_the_deadline_on_postgres() {
    a_failing_gate_rolls_back_at_its_first_check_long_before_the_deadline(
        TestApp::spawn_postgres().await,
    )
    .await;
}

#[tokio::test]
async fn checks_without_data_never_fail_and_the_failure_limit_counts_failing_checks_in_a_row() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let gates = json!([{"errorRate": {"maxPercent": 5, "intervalSeconds": 10, "failureLimit": 3}}]);
    let (id, _) = bad_canary(&app, &p.id, hour_long_first_stage(gates)).await;

    // No canary node has reported yet: the check is inconclusive and stored as such.
    app.clock.advance_ms(10_000);
    let outcomes = releases::tick(&app.control, app.now()).await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].decision, Ticked::Checked);
    let r = app.release(&id).await;
    assert_eq!(r["status"], "CANARY_DEPLOYED");
    assert_eq!(check_verdicts(&r, 0), ["inconclusive"]);
    let last = &r["stages"][0]["checks"][0]["last"];
    assert_eq!(
        last["reason"],
        "no error counters reported by canary nodes since the stage started"
    );

    // Now the canary reports its errors: two failing checks are not yet the limit of three.
    poll_twice(&mut [&mut a, &mut b]).await;
    assert!(app.tick_after(10_000).await.is_empty());
    poll_all(&mut [&mut a, &mut b]).await;
    assert!(app.tick_after(10_000).await.is_empty());
    let r = app.release(&id).await;
    assert_eq!(check_verdicts(&r, 0), ["inconclusive", "fail", "fail"]);
    assert_eq!(r["stages"][0]["checks"][0]["failingStreak"], 2);
    assert_eq!(r["stages"][0]["evaluations"], json!([]));

    assert_eq!(app.decide_after(10_000).await, "rollback");
    let r = app.release(&id).await;
    let failure = r["failure_reason"].as_str().unwrap();
    assert!(
        failure.ends_with("(3 failing checks in a row)"),
        "{failure}"
    );
    assert_eq!(
        check_verdicts(&r, 0),
        ["inconclusive", "fail", "fail", "fail"]
    );
}

#[tokio::test]
async fn an_inconclusive_check_followed_by_data_lets_a_good_stage_pass_at_the_deadline() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let gates = json!([{"errorRate": {"maxPercent": 5, "intervalSeconds": 10}}]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates)]},
        }))
        .await;
    assert!(app.tick_after(10_000).await.is_empty());
    poll_twice(&mut [&mut a, &mut b]).await;
    assert!(app.tick_after(10_000).await.is_empty());
    assert_eq!(app.decide_after(10_000).await, "advance");
    let r = app.release(&id).await;
    // The deadline's evaluation is the final check.
    assert_eq!(check_verdicts(&r, 0), ["inconclusive", "pass", "pass"]);
    assert_eq!(results(&r, 0, 0)[0]["verdict"], "pass");
    assert_eq!(r["current_stage"], 1);
}

#[tokio::test]
async fn on_no_data_hold_holds_for_an_operator_at_the_deadline_instead_of_failing_closed() {
    let app = TestApp::spawn().await;
    let (_a, _b, p) = two_waves_on_v1(&app).await;
    let held = json!([{"errorRate": {"maxPercent": 5, "onNoData": "hold"}}]);
    // Nobody reports during the bake, so proof of apply is off: the gate alone decides.
    let plan = json!({
        "stages": [wave("a", held.clone()), wave("b", held)],
        "minAppliedPercent": 0,
    });
    let (id, _) = app
        .create_release(json!({"pipeline_id": p.id, "config_yaml": "v: 2\n", "rollout_plan": plan}))
        .await;
    assert_eq!(app.decide_after(30_000).await, "hold");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "HEALTH_CHECK");
    assert_eq!(
        r["hold_reason"],
        "stage 1 could not be judged: errorRate: no error counters reported by canary nodes \
         since the stage started: onNoData is hold"
    );
    assert_eq!(results(&r, 0, 0)[0]["verdict"], "inconclusive");
    assert_eq!(
        r["allowed_actions"],
        json!(["advance", "complete", "pause", "rollback"])
    );

    // The default policy fails closed: the same release without it rolls back.
    app.press("rollback", &id).await;
    let closed = json!([{"errorRate": {"maxPercent": 5}}]);
    let plan = json!({
        "stages": [wave("a", closed.clone()), wave("b", closed)],
        "minAppliedPercent": 0,
    });
    app.create_release(json!({"pipeline_id": p.id, "config_yaml": "v: 4\n", "rollout_plan": plan}))
        .await;
    assert_eq!(app.decide_after(30_000).await, "rollback");
}

#[tokio::test]
async fn without_auto_rollback_a_gate_failing_mid_bake_holds_and_the_canary_stays_fenced() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let gates = json!([{"errorRate": {"maxPercent": 5, "intervalSeconds": 10}}]);
    let mut plan = hour_long_first_stage(gates);
    plan["autoRollbackOnGateFail"] = json!(false);
    let (id, _) = bad_canary(&app, &p.id, plan).await;
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(app.decide_after(10_000).await, "hold");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "HEALTH_CHECK");
    assert!(
        r["hold_reason"]
            .as_str()
            .unwrap()
            .starts_with("stage 1 failed during its bake: errorRate"),
        "{}",
        r["hold_reason"]
    );
    assert_eq!(r["stages"][0]["outcome"], "held");
    // Held releases are not checked any more.
    assert!(app.tick_after(60_000).await.is_empty());
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);
}

#[tokio::test]
async fn an_early_advance_is_refused_and_kept_apart_leaving_the_stage_evidence_untouched() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let gates = json!([{"healthWindow": {}}, {"errorRate": {"maxPercent": 5}}]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates)]},
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;
    app.clock.advance_ms(3_000);
    let refused = app
        .call_refused("release.canary.advance", json!({ "release_id": id }), 409)
        .await;
    assert_eq!(
        refused,
        "refused: healthWindow gate failed: bake window has not elapsed: 27s left"
    );
    let r = app.release(&id).await;
    assert_eq!(r["stages"][0]["evaluations"], json!([]));
    assert_eq!(r["stages"][0]["refused"][0]["gate"], "healthWindow");
    assert_eq!(r["stages"][0]["refused"][0]["action"], "advance");

    // The scheduler's evaluation at the deadline is the stage's only evidence.
    assert_eq!(app.decide_after(27_000).await, "advance");
    let r = app.release(&id).await;
    let evaluations = r["stages"][0]["evaluations"].as_array().unwrap();
    assert_eq!(evaluations.len(), 1);
    assert_eq!(evaluations[0]["trigger"], "scheduler");
    assert_eq!(r["stages"][0]["outcome"], "passed");
}
