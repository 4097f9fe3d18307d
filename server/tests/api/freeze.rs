//! Stopping the line and freeze windows, end to end with the injected clock: what pauses,
//! what is refused (and in which words), what an admin's override lets through, what the
//! scheduler does at a deadline inside a window, and a window edge across a DST change.

use serde_json::{json, Value};
use vf_control::access::Role;

use crate::helpers::{browser_with_session, grant, TestApp};
use crate::releases::{actions, details, poll_twice, two_waves_on_v1, wave};

/// Friday 2026-12-04 14:59:50 UTC: ten seconds before "Fri 16:00 Europe/Berlin".
const FRIDAY_BEFORE_FREEZE: i64 = 1_796_396_390_000;

fn two_waves(gates: Value) -> Value {
    json!({"stages": [wave("a", gates.clone()), wave("b", gates)]})
}

/// The audit events about one target, oldest first.
async fn audit_of(app: &TestApp, kind: &str, target: &str) -> Vec<vf_control::audit::AuditRow> {
    let mut rows = vf_control::testing::audit_for_target(&app.control.db, kind, target, 50)
        .await
        .unwrap();
    rows.reverse();
    rows
}

#[tokio::test]
async fn stopping_the_line_pauses_releases_refuses_changes_until_lifted_then_resumes_them() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let other = app.create_pipeline("metrics", &[]).await;
    app.deploy(&other.id, "m: 1\n").await;
    let (id, created) = app
        .create_release(json!({
            "pipeline_id": p.id, "config_yaml": "v: 2\n", "rollout_plan": two_waves(json!([])),
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;
    app.clock.advance_ms(10_000);

    let stopped = app
        .call_ok(
            "environment.line.stop",
            json!({"environment_id": app.env_id, "reason": "incident 42"}),
        )
        .await;
    assert_eq!(stopped["releases"], json!([id]));
    assert_eq!(stopped["hold"]["lineStopped"]["by"], "token:bootstrap");
    assert_eq!(stopped["hold"]["lineStopped"]["reason"], "incident 42");
    let r = app.release(&id).await;
    assert_eq!(r["paused"]["reason"], "line stopped: incident 42");
    assert_eq!(r["paused"]["lineStop"], true);
    assert_eq!(r["paused"]["bakeLeftMs"], 20_000);

    // Nothing moves, in the stated words; rollback alone would.
    let refused = app
        .call_refused(
            "release.canary.create",
            json!({"pipeline_id": other.id, "config_yaml": "m: 2\n", "rollout_plan": two_waves(json!([]))}),
            409,
        )
        .await;
    assert_eq!(
        refused,
        "cannot start a release: the line of test is stopped by token:bootstrap: incident 42; \
         an admin lifts it first"
    );
    let refused = app
        .call_refused(
            "pipeline.deploy",
            json!({"pipeline_id": other.id, "config_yaml": "m: 2\n", "changelog": "",
                   "override_freeze": true, "reason": "urgent"}),
            409,
        )
        .await;
    assert!(refused.starts_with("cannot deploy directly: the line of test is stopped"));
    let refused = app
        .call_refused("release.canary.resume", json!({"release_id": id}), 409)
        .await;
    assert!(refused.starts_with("cannot resume: the line of test is stopped"));
    assert!(app.tick_after(10 * 60_000).await.is_empty());
    let again = app
        .call_refused(
            "environment.line.stop",
            json!({"environment_id": app.env_id}),
            409,
        )
        .await;
    assert_eq!(
        again,
        "the line of test is already stopped by token:bootstrap"
    );

    // Lifting resumes the release with the 20 s it had left.
    let lifted = app
        .call_ok(
            "environment.line.lift",
            json!({"environment_id": app.env_id, "reason": "fixed"}),
        )
        .await;
    assert_eq!(lifted["releases"], json!([id]));
    assert_eq!(lifted["hold"]["lineStopped"], Value::Null);
    let r = app.release(&id).await;
    assert_eq!(r["paused"], Value::Null);
    assert_eq!(r["bake_deadline"].as_i64().unwrap(), app.now() + 20_000);
    assert!(r["bake_deadline"].as_i64().unwrap() > created["bake_deadline"].as_i64().unwrap());
    assert_eq!(app.decide_after(20_000).await, "advance");
    let log = audit_of(&app, "environment", &app.env_id).await;
    assert_eq!(
        actions(&log),
        [
            "environment.create",
            "environment.line_stop",
            "environment.line_lift"
        ]
    );
    assert_eq!(details(&log[1])["operatorReason"], "incident 42");
    assert_eq!(
        actions(&app.release_audit(&id).await),
        [
            "release.create",
            "release.pause",
            "release.resume",
            "release.advance"
        ]
    );
}

#[tokio::test]
async fn lifting_the_line_leaves_a_release_an_operator_paused_paused() {
    let app = TestApp::spawn().await;
    let (_a, _b, p) = two_waves_on_v1(&app).await;
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id, "config_yaml": "v: 2\n", "rollout_plan": two_waves(json!([])),
        }))
        .await;
    app.call_ok(
        "release.canary.pause",
        json!({"release_id": id, "reason": "waiting for the DB team"}),
    )
    .await;
    let stopped = app
        .call_ok(
            "environment.line.stop",
            json!({"environment_id": app.env_id}),
        )
        .await;
    assert_eq!(stopped["releases"], json!([]), "it was paused already");
    let lifted = app
        .call_ok(
            "environment.line.lift",
            json!({"environment_id": app.env_id}),
        )
        .await;
    assert_eq!(lifted["releases"], json!([]));
    let r = app.release(&id).await;
    assert_eq!(r["paused"]["reason"], "waiting for the DB team");
    // Rollback is allowed whatever holds the environment.
    app.call_ok(
        "environment.line.stop",
        json!({"environment_id": app.env_id}),
    )
    .await;
    let rolled = app
        .call_ok("release.canary.rollback", json!({"release_id": id}))
        .await;
    assert_eq!(rolled["status"], "ROLLED_BACK");
}

#[tokio::test]
async fn a_freeze_holds_a_passing_stage_and_refuses_changes_unless_an_admin_overrides() {
    let app = TestApp::spawn().await;
    app.clock.set_ms(FRIDAY_BEFORE_FREEZE);
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let window = app
        .call_ok(
            "freeze.create",
            json!({"environment_id": app.env_id, "window": "fri 16:00 - mon 8:00 Europe/Berlin",
                   "reason": "weekend"}),
        )
        .await;
    assert_eq!(window["window"], "Fri 16:00 - Mon 08:00 Europe/Berlin");
    assert_eq!(window["open"], false);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id, "config_yaml": "v: 2\n", "rollout_plan": two_waves(json!([])),
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;

    // The bake ends at 15:00:20 UTC, 16:00:20 in Berlin: inside the window.
    assert_eq!(app.decide_after(30_000).await, "hold");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "HEALTH_CHECK");
    assert_eq!(
        r["hold_reason"],
        "stage 1 passed; not going on during the freeze Fri 16:00 - Mon 08:00 Europe/Berlin \
         (until Mon 7 Dec 08:00 Europe/Berlin): an operator continues it"
    );
    let hold = app
        .call_ok("environment.hold", json!({"environment_id": app.env_id}))
        .await;
    assert_eq!(hold["freeze"]["reason"], "weekend");
    assert_eq!(hold["freeze"]["untilText"], "Mon 7 Dec 08:00 Europe/Berlin");

    let frozen = "cannot advance: test is frozen (Fri 16:00 - Mon 08:00 Europe/Berlin: weekend) \
                  until Mon 7 Dec 08:00 Europe/Berlin; an admin may override with a reason";
    let refused = app
        .call_refused("release.canary.advance", json!({"release_id": id}), 409)
        .await;
    assert_eq!(refused, frozen);
    let refused = app
        .call_refused(
            "release.canary.advance",
            json!({"release_id": id, "override_freeze": true}),
            400,
        )
        .await;
    assert_eq!(refused, "reason: overriding a freeze needs a reason");

    // An editor cannot override; an admin can, and the reason is kept.
    let editor = app
        .signed_in_user("ed@example.com", &[grant(&app.env_id, Role::Editor)])
        .await;
    let (status, text) = app
        .call_as(
            &browser_with_session(&editor),
            "release.canary.advance",
            json!({"release_id": id, "override_freeze": true, "reason": "hotfix"}),
        )
        .await;
    assert_eq!(status, 403, "{text}");
    let advanced = app
        .call_ok(
            "release.canary.advance",
            json!({"release_id": id, "override_freeze": true, "reason": "hotfix for INC-7"}),
        )
        .await;
    assert_eq!(advanced["current_stage"], 1);
    let log = app.release_audit(&id).await;
    assert_eq!(
        details(log.last().unwrap())["operatorReason"],
        "hotfix for INC-7"
    );

    // A direct deploy elsewhere: refused, then let through with the admin's reason.
    let other = app.create_pipeline("metrics", &[]).await;
    let deploy = json!({"pipeline_id": other.id, "config_yaml": "m: 1\n", "changelog": ""});
    let refused = app
        .call_refused("pipeline.deploy", deploy.clone(), 409)
        .await;
    assert!(
        refused.starts_with("cannot deploy directly: test is frozen"),
        "{refused}"
    );
    let mut through = deploy;
    through["override_freeze"] = json!(true);
    through["reason"] = json!("new pipeline, nothing to break");
    app.call_ok("pipeline.deploy", through).await;
    let log = audit_of(&app, "pipeline", &other.id).await;
    let deployed = log.iter().find(|e| e.action == "pipeline.deploy").unwrap();
    assert_eq!(
        details(deployed)["freezeOverride"],
        "new pipeline, nothing to break"
    );

    // Rollback is always allowed; deleting the window ends the freeze.
    let rolled = app
        .call_ok("release.canary.rollback", json!({"release_id": id}))
        .await;
    assert_eq!(rolled["status"], "ROLLED_BACK");
    app.call_ok("freeze.delete", json!({"id": window["id"]}))
        .await;
    let hold = app
        .call_ok("environment.hold", json!({"environment_id": app.env_id}))
        .await;
    assert_eq!(hold["freeze"], Value::Null);
}

#[tokio::test]
async fn a_weekly_window_ends_on_the_wall_clock_across_a_dst_change() {
    let app = TestApp::spawn().await;
    // Monday 2026-03-23 06:30 UTC is 07:30 in Berlin (winter time): still frozen.
    app.clock.set_ms(1_774_247_400_000);
    let p = app.create_pipeline("logs", &[]).await;
    app.call_ok(
        "freeze.create",
        json!({"environment_id": app.env_id, "window": "Fri 16:00 - Mon 08:00 Europe/Berlin"}),
    )
    .await;
    let deploy = |v: &str| json!({"pipeline_id": p.id, "config_yaml": v, "changelog": ""});
    let refused = app
        .call_refused("pipeline.deploy", deploy("v: 1\n"), 409)
        .await;
    assert!(
        refused.contains("until Mon 23 Mar 08:00 Europe/Berlin"),
        "{refused}"
    );
    // Half an hour later (07:00 UTC, 08:00 CET) the window closed.
    app.clock.advance_ms(30 * 60_000);
    app.call_ok("pipeline.deploy", deploy("v: 1\n")).await;

    // A week on, summer time: 05:59 UTC is 07:59 in Berlin, frozen; 06:00 UTC is 08:00, open.
    app.clock.set_ms(1_774_850_340_000);
    let refused = app
        .call_refused("pipeline.deploy", deploy("v: 2\n"), 409)
        .await;
    assert!(
        refused.contains("until Mon 30 Mar 08:00 Europe/Berlin"),
        "{refused}"
    );
    app.clock.advance_ms(60_000);
    app.call_ok("pipeline.deploy", deploy("v: 2\n")).await;
}

#[tokio::test]
async fn freeze_windows_are_read_strictly_and_managed_by_admins() {
    let app = TestApp::spawn().await;
    let refused = app
        .call_refused(
            "freeze.create",
            json!({"environment_id": app.env_id, "window": "Fri 16:00 - Mon 08:00 Mars/Olympus"}),
            400,
        )
        .await;
    assert_eq!(
        refused,
        "window: unknown time zone \"Mars/Olympus\": use a name such as Europe/Berlin or UTC"
    );
    let refused = app
        .call_refused(
            "freeze.create",
            json!({"environment_id": app.env_id, "window": "2026-12-27 - 2026-12-24 UTC"}),
            400,
        )
        .await;
    assert_eq!(refused, "window: ends before it starts");
    let editor = app
        .signed_in_user("ed@example.com", &[grant(&app.env_id, Role::Editor)])
        .await;
    let (status, _) = app
        .call_as(
            &browser_with_session(&editor),
            "freeze.create",
            json!({"environment_id": app.env_id, "window": "Sat 00:00 - Sun 00:00 UTC"}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = app
        .call_as(
            &browser_with_session(&editor),
            "environment.line.stop",
            json!({"environment_id": app.env_id}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, body) = app
        .call_as(
            &browser_with_session(&editor),
            "environment.hold",
            json!({"environment_id": app.env_id}),
        )
        .await;
    assert_eq!(status, 200, "an editor sees the banner: {body}");
}

#[tokio::test]
async fn stopping_the_line_on_postgres_pauses_and_lifting_resumes() {
    let app = TestApp::spawn_postgres().await;
    let (_a, _b, p) = two_waves_on_v1(&app).await;
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id, "config_yaml": "v: 2\n", "rollout_plan": two_waves(json!([])),
        }))
        .await;
    let stopped = app
        .call_ok(
            "environment.line.stop",
            json!({"environment_id": app.env_id}),
        )
        .await;
    assert_eq!(stopped["releases"], json!([id]));
    assert!(app.tick_after(10 * 60_000).await.is_empty());
    let lifted = app
        .call_ok(
            "environment.line.lift",
            json!({"environment_id": app.env_id}),
        )
        .await;
    assert_eq!(lifted["releases"], json!([id]));
}
