//! What the scheduler does when a stage's bake ends and its gates are read: a failing
//! errorRate gate rolls back (or holds, when the plan says so), and the throughputDrop gate
//! is skipped without a baseline and fails when traffic stops.

use serde_json::{json, Value};

use crate::helpers::{TestApp, MINUTE};
use crate::releases::{
    details, poll_all, poll_twice, results, served, stage, two_waves_on_v1, wave, BAD_CONFIG,
};

#[tokio::test]
async fn a_failing_error_rate_gate_in_stage_one_rolls_back_without_opening_stage_two() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;

    let gates = json!([{"healthWindow": {}}, {"errorRate": {"maxPercent": 5}}]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": BAD_CONFIG,
            "changelog": "a bad canary",
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates)]},
        }))
        .await;

    // During the bake only wave a runs the bad canary, and only it reports errors.
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);
    assert_eq!(
        app.file_on_disk("wave-a", &p.id).as_deref(),
        Some(BAD_CONFIG)
    );
    assert_eq!(app.file_on_disk("wave-b", &p.id).as_deref(), Some("v: 1\n"));

    assert_eq!(app.decide_after(30_000).await, "rollback");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "ROLLED_BACK");
    assert_eq!(
        r["stages"].as_array().unwrap().len(),
        1,
        "stage 2 never started"
    );
    assert_eq!(r["stages"][0]["outcome"], "failed");
    let failure = r["failure_reason"].as_str().unwrap();
    assert!(failure.contains("errorRate"), "{failure}");
    assert!(failure.contains("50.00%"), "{failure}");
    let gates = results(&r, 0, 0);
    assert_eq!(gates[0]["verdict"], "pass");
    assert_eq!(gates[1]["gate"], "errorRate");
    assert_eq!(gates[1]["verdict"], "fail");
    assert_eq!(gates[1]["observed"], 50.0);
    assert_eq!(gates[1]["threshold"], 5.0);
    assert_eq!(r["stages"][0]["evaluations"][0]["decision"], "rollback");

    // The rollback published the previous config as v3 and deployed it.
    assert_eq!(
        app.versions(&p.id).await,
        [
            (1, "v: 1\n".to_string()),
            (2, BAD_CONFIG.to_string()),
            (3, "v: 1\n".to_string())
        ]
    );
    assert_eq!(app.deployed_version(&p.id).await, Some(3));
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(3), Some(3)]);
    for host in ["wave-a", "wave-b"] {
        assert_eq!(app.file_on_disk(host, &p.id).as_deref(), Some("v: 1\n"));
    }
    let log = app.release_audit(&id).await;
    let rollback = log.last().unwrap();
    assert_eq!(
        (rollback.action.as_str(), rollback.actor.as_str()),
        ("release.rollback", "scheduler")
    );
    let d = details(rollback);
    assert_eq!(d["revertedVersion"], 3);
    assert_eq!(d["gateResults"][1]["verdict"], "fail");
    // Nothing is due any more.
    assert!(app.tick_after(MINUTE).await.is_empty());
}

#[tokio::test]
async fn without_auto_rollback_a_failing_gate_holds_in_health_check_and_fencing_stays() {
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;

    let gates = json!([{"errorRate": {"maxPercent": 5}}]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": BAD_CONFIG,
            "rollout_plan": {
                "stages": [wave("a", gates.clone()), wave("b", gates)],
                "autoRollbackOnGateFail": false,
            },
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);

    assert_eq!(app.decide_after(30_000).await, "hold");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "HEALTH_CHECK");
    let hold = r["hold_reason"].as_str().unwrap();
    assert!(hold.starts_with("stage 1 failed: errorRate: "), "{hold}");
    assert_eq!(r["failure_reason"], serde_json::Value::Null);
    assert_eq!(r["stages"].as_array().unwrap().len(), 1);
    assert_eq!(r["stages"][0]["outcome"], "held");
    assert_eq!(r["stages"][0]["evaluations"][0]["decision"], "hold");
    assert_eq!(results(&r, 0, 0)[0]["verdict"], "fail");
    assert_eq!(
        r["allowed_actions"],
        json!(["advance", "complete", "pause", "rollback"])
    );

    // Held: still fenced, nothing re-decided by later ticks, nothing deployed.
    assert!(app.tick_after(10 * MINUTE).await.is_empty());
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);
    assert_eq!(app.file_on_disk("wave-b", &p.id).as_deref(), Some("v: 1\n"));
    assert_eq!(app.deployed_version(&p.id).await, Some(1));
    assert_eq!(app.versions(&p.id).await.len(), 2);

    // The operator's way out.
    let rolled = app.press("rollback", &id).await;
    assert_eq!(rolled["status"], "ROLLED_BACK");
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(3), Some(3)]);
    assert_eq!(app.file_on_disk("wave-a", &p.id).as_deref(), Some("v: 1\n"));
}

#[tokio::test]
async fn the_throughput_gate_is_skipped_when_no_baseline_was_recorded() {
    let app = TestApp::spawn().await;
    let mut a = app.start_simulated_agent("wave-a", &[("wave", "a")]).await;
    let mut b = app.start_simulated_agent("wave-b", &[("wave", "b")]).await;
    let p = app.create_pipeline("fresh", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    // The agents fetch v1 but never report traffic of it: no rollups before the release.
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(1), Some(1)]);
    assert!(app.minutes(&p.id).await.is_empty());

    let gates = json!([{"throughputDrop": {"maxDropPercent": 10}}]);
    let (id, release) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", gates)]},
        }))
        .await;
    assert_eq!(release["baseline_eps"], serde_json::Value::Null);
    poll_twice(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);

    assert_eq!(app.decide_after(30_000).await, "complete");
    let r = app.release(&id).await;
    let gate = &results(&r, 0, 0)[0];
    assert_eq!(gate["gate"], "throughputDrop");
    assert_eq!(gate["verdict"], "skipped");
    assert!(
        gate["reason"].as_str().unwrap().contains("no baseline"),
        "{gate}"
    );
    assert_eq!(r["status"], "BROADENED");
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(2)]);
}

#[tokio::test]
async fn the_throughput_gate_fails_closed_without_rollups_during_the_bake_and_rolls_back() {
    let app = TestApp::spawn().await;
    // Simulated agents carry the traffic; recording agents (no counters) watch the fencing
    // without adding any.
    let mut busy_a = app.start_simulated_agent("busy-a", &[("wave", "a")]).await;
    let mut busy_b = app.start_simulated_agent("busy-b", &[("wave", "b")]).await;
    let mut watch_a = app.start_agent("watch-a", &[("wave", "a")]).await;
    let mut watch_b = app.start_agent("watch-b", &[("wave", "b")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;

    // Five minutes of traffic: a poll at 10 s into each minute; the first only fetches v1.
    app.clock.advance_ms(10_000);
    for _ in 0..5 {
        poll_all(&mut [&mut busy_a, &mut busy_b, &mut watch_a, &mut watch_b]).await;
        app.clock.advance_ms(MINUTE);
    }
    let minutes = app.minutes(&p.id).await;
    assert_eq!(minutes.len(), 4, "{minutes:?}");
    assert!(minutes.iter().all(|m| m.events_in == 200));
    let everyone = [&busy_a, &busy_b, &watch_a, &watch_b];
    assert_eq!(served(&everyone, &p.id), [Some(1); 4]);

    // Created at T0 + 5 min 10 s: the baseline is the 800 events of the 5 minutes before.
    let gates = json!([{"throughputDrop": {"maxDropPercent": 50}}]);
    let (id, release) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [
                stage(json!({"labels": {"wave": "a"}}), gates),
                wave("b", json!([])),
            ]},
        }))
        .await;
    let baseline = release["baseline_eps"].as_f64().unwrap();
    assert!((baseline - 800.0 / 300.0).abs() < 1e-9, "{baseline}");

    // During the bake the traffic stops; the watchers show stage 1 is fenced as usual.
    poll_all(&mut [&mut watch_a, &mut watch_b]).await;
    assert_eq!(
        served(&[&busy_a, &busy_b, &watch_a, &watch_b], &p.id),
        [Some(1), Some(1), Some(2), Some(1)]
    );
    assert_eq!(app.decide_after(30_000).await, "rollback");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "ROLLED_BACK");
    assert_eq!(r["stages"].as_array().unwrap().len(), 1);
    let gate = &results(&r, 0, 0)[0];
    assert_eq!(gate["gate"], "throughputDrop");
    assert_eq!(gate["verdict"], "fail");
    assert_eq!(gate["observed"], Value::Null);
    assert_eq!(
        gate["reason"],
        "no rollups since the stage started (baseline 2.67 events/s): fails closed"
    );
    assert!(r["failure_reason"]
        .as_str()
        .unwrap()
        .contains("throughputDrop"));

    poll_all(&mut [&mut busy_a, &mut busy_b, &mut watch_a, &mut watch_b]).await;
    assert_eq!(
        served(&[&busy_a, &busy_b, &watch_a, &watch_b], &p.id),
        [Some(3); 4]
    );
}

#[tokio::test]
async fn traffic_reported_before_the_stage_started_does_not_count_as_bake_throughput() {
    let app = TestApp::spawn().await;
    let mut busy = app.start_simulated_agent("busy", &[("wave", "a")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    // A poll at 5 s into each of the next six minutes; the first only fetches v1.
    app.clock.advance_ms(5_000);
    for _ in 0..6 {
        poll_all(&mut [&mut busy]).await;
        app.clock.advance_ms(MINUTE);
    }
    // One more report at T0 + 6 min 5 s, then the release starts 5 s later in that minute.
    poll_all(&mut [&mut busy]).await;
    app.clock.advance_ms(5_000);
    let gates = json!([{"throughputDrop": {"maxDropPercent": 50}}]);
    let (id, release) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", gates)]},
        }))
        .await;
    assert!(release["baseline_eps"].as_f64().unwrap() > 0.0);
    assert_eq!(served(&[&busy], &p.id), [Some(1)]);

    // Not one event is reported during the bake.
    assert_eq!(app.decide_after(30_000).await, "rollback");
    let r = app.release(&id).await;
    let gate = &results(&r, 0, 0)[0];
    assert_eq!(gate["verdict"], "fail", "{gate}");
    assert!(
        gate["reason"]
            .as_str()
            .unwrap()
            .starts_with("no rollups since the stage started"),
        "{gate}"
    );
    poll_all(&mut [&mut busy]).await;
    assert_eq!(served(&[&busy], &p.id), [Some(3)]);
}
