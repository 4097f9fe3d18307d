//! Compare-and-set on the release row: a scheduler tick racing a button press, or two ticks
//! (two replicas) racing, make exactly one transition; racing creates and deploys leave one
//! consistent outcome. And a restart mid-bake loses nothing.

use serde_json::json;
use vf_control::releases;
use vf_rules::Action;

use crate::helpers::{operator, TestApp};
use crate::releases::{actions, poll_all, poll_twice, served, wave};

/// A pipeline at v1 on two agents and a one-stage release of v2 to wave a, due now.
async fn due_release(app: &TestApp) -> (String, String, [vf_agent::Agent; 2]) {
    let mut a = app.start_agent("wave-a", &[("wave", "a")]).await;
    let mut b = app.start_agent("wave-b", &[("wave", "b")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(1), Some(1)]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", json!([{"healthWindow": {}}]))]},
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);
    app.clock.advance_ms(30_000);
    (p.id, id, [a, b])
}

async fn a_tick_and_a_rollback_press_on_a_due_release_make_one_transition(app: TestApp) {
    let (pipeline_id, id, [mut a, mut b]) = due_release(&app).await;
    let before = app.release(&id).await;

    let operator = operator();
    let (ticked, pressed) = tokio::join!(
        releases::tick(&app.control, app.now()),
        releases::act(&app.control, &operator, &id, Action::Rollback),
    );
    let ticked: Vec<_> = ticked
        .unwrap()
        .into_iter()
        .filter(|o| o.decision.as_str() != "lost-race")
        .collect();
    assert_eq!(
        ticked.len() + usize::from(pressed.is_ok()),
        1,
        "tick: {ticked:?}, press: {pressed:?}"
    );

    let after = app.release(&id).await;
    assert_eq!(
        after["row_version"],
        before["row_version"].as_i64().unwrap() + 1
    );
    let log = app.release_audit(&id).await;
    let (status, transition, version) = if pressed.is_ok() {
        ("ROLLED_BACK", "release.rollback", 3)
    } else {
        assert_eq!(ticked[0].decision.as_str(), "complete");
        ("BROADENED", "release.complete", 2)
    };
    assert_eq!(after["status"], status);
    assert_eq!(actions(&log), ["release.create", transition]);
    assert_eq!(app.deployed_version(&pipeline_id).await, Some(version));
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(
        served(&[&a, &b], &pipeline_id),
        [Some(version), Some(version)]
    );
}

#[tokio::test]
async fn a_tick_and_a_rollback_press_on_a_due_release_make_exactly_one_transition() {
    a_tick_and_a_rollback_press_on_a_due_release_make_one_transition(TestApp::spawn().await).await;
}

#[tokio::test]
async fn a_tick_and_a_rollback_press_on_a_due_release_make_exactly_one_transition_on_postgres() {
    let app = TestApp::spawn_postgres().await;
    a_tick_and_a_rollback_press_on_a_due_release_make_one_transition(app).await;
}

async fn two_racing_ticks_make_one_transition(app: TestApp) {
    let (pipeline_id, id, [mut a, mut b]) = due_release(&app).await;
    let now = app.now();
    let (first, second) = tokio::join!(
        releases::tick(&app.control, now),
        releases::tick(&app.control, now)
    );
    let decisions: Vec<String> = first
        .unwrap()
        .into_iter()
        .chain(second.unwrap())
        .map(|o| o.decision.as_str().to_string())
        .filter(|d| d != "lost-race")
        .collect();
    assert_eq!(decisions, ["complete"]);
    let log = app.release_audit(&id).await;
    assert_eq!(actions(&log), ["release.create", "release.complete"]);
    assert_eq!(app.release(&id).await["status"], "BROADENED");
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &pipeline_id), [Some(2), Some(2)]);
}

#[tokio::test]
async fn two_ticks_racing_on_a_due_release_make_exactly_one_transition() {
    two_racing_ticks_make_one_transition(TestApp::spawn().await).await;
}

#[tokio::test]
async fn two_ticks_racing_on_a_due_release_make_exactly_one_transition_on_postgres() {
    two_racing_ticks_make_one_transition(TestApp::spawn_postgres().await).await;
}

#[tokio::test]
async fn a_server_restarted_mid_bake_decides_at_the_stored_deadline_as_if_it_never_stopped() {
    let first = TestApp::spawn().await;
    let mut a = first
        .start_simulated_agent("wave-a", &[("wave", "a")])
        .await;
    let mut b = first
        .start_simulated_agent("wave-b", &[("wave", "b")])
        .await;
    let p = first.create_pipeline("logs", &[]).await;
    first.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut a, &mut b]).await;
    let gates = json!([{"healthWindow": {}}, {"errorRate": {"maxPercent": 5}}]);
    let mut plan = json!({"stages": [wave("a", gates.clone()), wave("b", gates)]});
    plan["stages"][0]["bakeSeconds"] = json!(120);
    let (id, created) = first
        .create_release(json!({"pipeline_id": p.id, "config_yaml": "v: 2\n", "rollout_plan": plan}))
        .await;
    let deadline = created["bake_deadline"].as_i64().unwrap();
    assert_eq!(deadline, first.now() + 120_000);
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);
    assert!(first.tick_after(60_000).await.is_empty());
    let (node_a, node_b) = (a.node_id().to_string(), b.node_id().to_string());
    drop((a, b));

    // A new server (and restarted agents) on the same database file, its clock where the
    // old one stopped.
    let now = first.now();
    let app = first.restart_with(now, |_| {}).await;
    let mut a = app.start_simulated_agent("wave-a", &[("wave", "a")]).await;
    let mut b = app.start_simulated_agent("wave-b", &[("wave", "b")]).await;
    assert_eq!(
        (a.node_id(), b.node_id()),
        (node_a.as_str(), node_b.as_str())
    );
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);

    // The stored deadline stands: not due a millisecond early, decided once it passes.
    let r = app.release(&id).await;
    assert_eq!(r["bake_deadline"], deadline);
    assert!(app.tick_after(deadline - app.now() - 1).await.is_empty());
    assert_eq!(app.decide_after(1).await, "advance");
    let advanced = app.release(&id).await;
    assert_eq!(advanced["status"], "CANARY_DEPLOYED");
    let evaluation = &advanced["stages"][0]["evaluations"][0];
    assert_eq!(evaluation["at"], deadline);
    assert_eq!(evaluation["results"][1]["verdict"], "pass");
    assert_eq!(advanced["stages"][1]["started_at"], deadline);
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(2)]);
}

/// How many times a create race is run: the interleaving differs from run to run.
const ATTEMPTS: usize = 10;

/// A server function's answer, cut short for an assertion message.
fn brief((status, body): &(u16, String)) -> String {
    format!("{status} {}", body.chars().take(120).collect::<String>())
}

async fn racing_creates_make_one_release_and_refuse_the_other(app: TestApp) {
    let mut a = app.start_agent("wave-a", &[("wave", "a")]).await;
    for attempt in 0..ATTEMPTS {
        let p = app.create_pipeline(&format!("logs-{attempt}"), &[]).await;
        app.deploy(&p.id, "v: 1\n").await;
        let body = |config: &str| {
            json!({
                "pipeline_id": p.id,
                "config_yaml": config,
                "rollout_plan": {"stages": [wave("a", json!([]))]},
            })
        };
        let (first, second) = tokio::join!(
            app.call("release.canary.create", body("v: first\n")),
            app.call("release.canary.create", body("v: second\n")),
        );
        let mut statuses = [first.0, second.0];
        statuses.sort();
        assert_eq!(
            statuses,
            [200, 409],
            "attempt {attempt}: {} / {}",
            brief(&first),
            brief(&second)
        );
        let winner = if first.0 == 200 {
            "v: first\n"
        } else {
            "v: second\n"
        };

        let releases = app
            .call_ok("release.list", json!({ "pipeline_id": p.id }))
            .await;
        assert_eq!(releases.as_array().unwrap().len(), 1);
        assert_eq!(releases[0]["canary_version"], 2);
        assert_eq!(
            app.versions(&p.id).await,
            [(1, "v: 1\n".to_string()), (2, winner.to_string())]
        );
        poll_all(&mut [&mut a]).await;
        assert_eq!(served(&[&a], &p.id), [Some(2)]);
        assert_eq!(app.file_on_disk("wave-a", &p.id).as_deref(), Some(winner));
    }
}

#[tokio::test]
async fn two_racing_creates_for_one_pipeline_make_one_release_and_refuse_the_other_with_409() {
    racing_creates_make_one_release_and_refuse_the_other(TestApp::spawn().await).await;
}

#[tokio::test]
async fn two_racing_creates_for_one_pipeline_make_one_release_and_refuse_the_other_on_postgres() {
    racing_creates_make_one_release_and_refuse_the_other(TestApp::spawn_postgres().await).await;
}

async fn a_deploy_racing_a_create_is_refused_or_becomes_the_previous_version(app: TestApp) {
    let mut a = app.start_agent("wave-a", &[("wave", "a")]).await;
    let mut b = app.start_agent("wave-b", &[("wave", "b")]).await;
    for attempt in 0..ATTEMPTS {
        let p = app.create_pipeline(&format!("logs-{attempt}"), &[]).await;
        app.deploy(&p.id, "v: 1\n").await;
        let (created, deployed) = tokio::join!(
            app.call(
                "release.canary.create",
                json!({
                    "pipeline_id": p.id,
                    "config_yaml": "v: canary\n",
                    "rollout_plan": {"stages": [wave("a", json!([]))]},
                }),
            ),
            app.call(
                "pipeline.deploy",
                json!({"pipeline_id": p.id, "config_yaml": "v: hotfix\n", "changelog": "hotfix"}),
            ),
        );
        let context = format!(
            "attempt {attempt}: create {}, deploy {}",
            brief(&created),
            brief(&deployed)
        );
        for status in [created.0, deployed.0] {
            assert!(status == 200 || status == 409, "{context}");
        }
        let versions = app.versions(&p.id).await;
        let number_of = |config: &str| versions.iter().find(|(_, c)| c == config).map(|(v, _)| *v);
        let (canary, hotfix) = (number_of("v: canary\n"), number_of("v: hotfix\n"));
        assert_eq!(canary.is_some(), created.0 == 200, "{context}");
        assert_eq!(hotfix.is_some(), deployed.0 == 200, "{context}");
        // Whatever won, untargeted nodes keep what was deployed when the canary was minted:
        // a deploy that succeeded is never silently undone by the release's fencing.
        let deployed_now = app.deployed_version(&p.id).await;
        let releases = app
            .call_ok("release.list", json!({ "pipeline_id": p.id }))
            .await;
        if let Some(release) = releases.as_array().unwrap().first() {
            assert_eq!(
                release["previous_version"],
                json!(deployed_now),
                "{context}"
            );
        }
        poll_all(&mut [&mut a, &mut b]).await;
        let expected_b = hotfix.unwrap_or(1);
        assert_eq!(
            served(&[&a, &b], &p.id),
            [canary.or(hotfix).or(Some(1)), Some(expected_b)],
            "{context}"
        );
    }
}

#[tokio::test]
async fn a_direct_deploy_racing_a_create_is_refused_or_becomes_the_previous_version() {
    a_deploy_racing_a_create_is_refused_or_becomes_the_previous_version(TestApp::spawn().await)
        .await;
}

#[tokio::test]
async fn a_direct_deploy_racing_a_create_is_refused_or_becomes_the_previous_version_on_postgres() {
    let app = TestApp::spawn_postgres().await;
    a_deploy_racing_a_create_is_refused_or_becomes_the_previous_version(app).await;
}
