//! Releases that wait for an operator: `autoAdvance: false`, plan-less canaries broadened by
//! hand, and rolling back a first deploy. Fencing is checked from what each agent received.

use serde_json::{json, Value};

use crate::helpers::{TestApp, MINUTE, OPERATOR};
use crate::releases::{
    actions, details, poll_all, poll_twice, results, served, two_waves_on_v1, wave,
};

#[tokio::test]
async fn without_auto_advance_a_passing_stage_holds_until_an_operator_advances_then_completes() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;

    let gates = json!([{"healthWindow": {}}, {"errorRate": {"maxPercent": 5}}]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {
                "stages": [wave("a", gates.clone()), wave("b", gates)],
                "autoAdvance": false,
            },
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);

    assert_eq!(app.decide_after(30_000).await, "hold");
    let held = app.release(&id).await;
    assert_eq!(held["status"], "HEALTH_CHECK");
    assert_eq!(
        held["hold_reason"],
        "stage 1 passed; waiting for an operator"
    );
    assert_eq!(held["stages"][0]["outcome"], "held");
    assert_eq!(results(&held, 0, 0)[1]["verdict"], "pass");
    // Held releases are not re-decided, and wave b is still fenced.
    assert!(app.tick_after(5 * MINUTE).await.is_empty());
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);

    let advanced = app.press("advance", &id).await;
    assert_eq!(advanced["status"], "CANARY_DEPLOYED");
    assert_eq!(advanced["current_stage"], 1);
    assert_eq!(advanced["hold_reason"], Value::Null);
    assert_eq!(advanced["stages"][1]["node_count"], 1);
    assert_eq!(app.stage_nodes(&id, 1).await, [b.node_id()]);
    let manual = &advanced["stages"][0]["evaluations"][1];
    assert_eq!(
        (&manual["trigger"], &manual["actor"], &manual["decision"]),
        (&json!("advance"), &json!(OPERATOR), &json!("advance"))
    );
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(2)]);

    // The last stage holds too; the operator completes.
    assert_eq!(app.decide_after(30_000).await, "hold");
    assert_eq!(app.deployed_version(&p.id).await, Some(1));
    let done = app.press("complete", &id).await;
    assert_eq!(done["status"], "BROADENED");
    assert_eq!(app.deployed_version(&p.id).await, Some(2));
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(2)]);

    let log = app.release_audit(&id).await;
    assert_eq!(
        actions(&log),
        [
            "release.create",
            "release.hold",
            "release.advance",
            "release.hold",
            "release.complete"
        ]
    );
    let actors: Vec<&str> = log.iter().map(|r| r.actor.as_str()).collect();
    assert_eq!(
        actors,
        [OPERATOR, "scheduler", OPERATOR, "scheduler", OPERATOR]
    );
    for row in &log[1..] {
        let d = details(row);
        assert_eq!(d["gateResults"][1]["gate"], "errorRate", "{d}");
    }
}

/// A plan-less canary with `selector`, on four nodes labelled wave a, a, b, b.
async fn planless_canary_holds_after_its_window_and_is_broadened_by_hand(
    selector: Value,
    canary_count: usize,
) {
    let app = TestApp::spawn().await;
    let mut a1 = app.start_agent("a1", &[("wave", "a")]).await;
    let mut a2 = app.start_agent("a2", &[("wave", "a")]).await;
    let mut b1 = app.start_agent("b1", &[("wave", "b")]).await;
    let mut b2 = app.start_agent("b2", &[("wave", "b")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut a1, &mut a2, &mut b1, &mut b2]).await;
    assert_eq!(served(&[&a1, &a2, &b1, &b2], &p.id), [Some(1); 4]);

    let (id, release) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "canary_selector": selector,
            "health_check_window_minutes": 1,
        }))
        .await;
    assert_eq!(release["planless"], true);
    assert_eq!(release["stage_count"], 1);
    assert_eq!(
        release["bake_deadline"].as_i64().unwrap(),
        app.now() + MINUTE
    );
    assert_eq!(release["stages"][0]["node_count"], canary_count as i64);
    let canaries = app.stage_nodes(&id, 0).await;
    assert_eq!(canaries.len(), canary_count);
    let expected = |agents: &[&vf_agent::Agent], canary: i64, other: i64| -> Vec<Option<i64>> {
        agents
            .iter()
            .map(|a| {
                Some(if canaries.iter().any(|c| c == a.node_id()) {
                    canary
                } else {
                    other
                })
            })
            .collect()
    };

    poll_all(&mut [&mut a1, &mut a2, &mut b1, &mut b2]).await;
    let everyone = [&a1, &a2, &b1, &b2];
    assert_eq!(served(&everyone, &p.id), expected(&everyone, 2, 1));

    assert!(app.tick_after(30_000).await.is_empty());
    // Broadening before the window is over is refused: the health window has not elapsed.
    let early = app
        .call_refused("release.canary.broaden", json!({ "release_id": id }), 409)
        .await;
    assert!(early.contains("healthWindow gate failed"), "{early}");
    assert_eq!(app.deployed_version(&p.id).await, Some(1));
    assert_eq!(app.decide_after(30_000).await, "hold");
    let held = app.release(&id).await;
    assert_eq!(held["status"], "HEALTH_CHECK");
    assert_eq!(
        held["allowed_actions"],
        json!(["broaden", "pause", "rollback"])
    );
    // Past the window the canary is still fenced until someone broadens it.
    assert!(app.tick_after(10 * MINUTE).await.is_empty());
    poll_all(&mut [&mut a1, &mut a2, &mut b1, &mut b2]).await;
    let everyone = [&a1, &a2, &b1, &b2];
    assert_eq!(served(&everyone, &p.id), expected(&everyone, 2, 1));
    // A plan-less canary has no next stage.
    let refusal = app
        .call_refused("release.canary.advance", json!({ "release_id": id }), 409)
        .await;
    assert!(refusal.contains("no next stage"), "{refusal}");

    let broadened = app.press("broaden", &id).await;
    assert_eq!(broadened["status"], "BROADENED");
    let evaluations = broadened["stages"][0]["evaluations"].as_array().unwrap();
    let decisions: Vec<&Value> = evaluations.iter().map(|e| &e["decision"]).collect();
    assert_eq!(decisions, [&json!("hold"), &json!("complete")]);
    assert_eq!(evaluations[1]["trigger"], "broaden");
    // The early press is kept as a refused attempt, not as the stage's evidence.
    let refused = broadened["stages"][0]["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["action"], "broaden");
    assert_eq!(refused[0]["gate"], "healthWindow");
    assert_eq!(app.deployed_version(&p.id).await, Some(2));
    poll_all(&mut [&mut a1, &mut a2, &mut b1, &mut b2]).await;
    assert_eq!(served(&[&a1, &a2, &b1, &b2], &p.id), [Some(2); 4]);
    for host in ["a1", "a2", "b1", "b2"] {
        assert_eq!(app.file_on_disk(host, &p.id).as_deref(), Some("v: 2\n"));
    }
}

#[tokio::test]
async fn a_planless_label_canary_holds_after_its_window_and_is_broadened_by_hand() {
    let selector = json!({"labels": {"wave": "a"}});
    planless_canary_holds_after_its_window_and_is_broadened_by_hand(selector, 2).await;
}

#[tokio::test]
async fn a_planless_percentage_canary_holds_after_its_window_and_is_broadened_by_hand() {
    let selector = json!({"percentage": 50});
    planless_canary_holds_after_its_window_and_is_broadened_by_hand(selector, 2).await;
}

#[tokio::test]
async fn a_first_deploy_canary_withholds_the_pipeline_from_other_nodes_and_rollback_undeploys_it() {
    let app = TestApp::spawn().await;
    let mut a = app.start_agent("wave-a", &[("wave", "a")]).await;
    let mut b = app.start_agent("wave-b", &[("wave", "b")]).await;
    let p = app.create_pipeline("new", &[]).await;
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [None, None]);

    let (id, release) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 1\n",
            "rollout_plan": {"stages": [wave("a", json!([])), wave("b", json!([]))]},
        }))
        .await;
    assert_eq!(release["canary_version"], 1);
    assert_eq!(release["previous_version"], Value::Null);

    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(1), None]);
    assert_eq!(app.file_on_disk("wave-a", &p.id).as_deref(), Some("v: 1\n"));
    assert!(!app.pipeline_file("wave-b", &p.id).exists());
    assert!(b.running().is_empty());

    let rolled = app.press("rollback", &id).await;
    assert_eq!(rolled["status"], "ROLLED_BACK");
    assert_eq!(
        rolled["failure_reason"],
        format!("rolled back by {OPERATOR}")
    );
    assert_eq!(app.deployed_version(&p.id).await, None);
    // Nothing to revert to: no version was published.
    assert_eq!(app.versions(&p.id).await.len(), 1);
    let log = app.release_audit(&id).await;
    assert_eq!(actions(&log), ["release.create", "release.rollback"]);
    assert_eq!(details(&log[1])["revertedVersion"], Value::Null);

    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [None, None]);
    assert!(a.running().is_empty(), "{:?}", a.running());
    assert!(!app.pipeline_file("wave-a", &p.id).exists());
    assert!(!app.pipeline_file("wave-b", &p.id).exists());
    // Nothing is left to decide.
    assert!(app.tick_after(MINUTE).await.is_empty());
}
