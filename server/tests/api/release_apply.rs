//! Proof of apply and crashes: a stage passes only when its nodes report running the canary,
//! and a canary node that reports the canary crashed fails the stage at once.

use std::time::{Duration, Instant};

use serde_json::json;
use vf_agent::{Agent, AgentOptions, CrashPolicy};
use vf_control::releases;

use crate::helpers::TestApp;
use crate::releases::{poll_all, poll_twice, served, wave};

#[tokio::test]
async fn a_node_that_never_applies_holds_the_stage_naming_it_and_blocks_a_manual_complete() {
    let app = TestApp::spawn().await;
    let mut a1 = app.start_simulated_agent("wave-a1", &[("wave", "a")]).await;
    let mut a2 = app.start_simulated_agent("wave-a2", &[("wave", "a")]).await;
    let mut b = app.start_simulated_agent("wave-b", &[("wave", "b")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut a1, &mut a2, &mut b]).await;
    let gates = json!([{"healthWindow": {}}]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates)]},
        }))
        .await;
    // a1 fetches v2 and reports it running; a2 stays silent on v1.
    poll_twice(&mut [&mut a1, &mut b]).await;
    assert_eq!(served(&[&a1, &a2, &b], &p.id), [Some(2), Some(1), Some(1)]);

    assert_eq!(app.decide_after(30_000).await, "hold");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "HEALTH_CHECK");
    let hold = r["hold_reason"].as_str().unwrap();
    assert!(
        hold.starts_with(
            "stage 1 could not be judged: applied: 1 of 2 nodes have not applied v2: wave-a2"
        ),
        "{hold}"
    );
    assert!(
        hold.contains("(50.00% applied, at least 100% needed)"),
        "{hold}"
    );
    let applied = &r["stages"][0]["evaluations"][0]["results"][1];
    assert_eq!(applied["gate"], "applied");
    assert_eq!(applied["observed"], 50.0);

    // An operator cannot complete past a node that has not applied either.
    let refused = app
        .call_refused("release.canary.complete", json!({ "release_id": id }), 409)
        .await;
    assert!(
        refused.contains("applied gate failed: 1 of 2 nodes"),
        "{refused}"
    );
    assert_eq!(app.deployed_version(&p.id).await, Some(1));

    // Once a2 reports v2 running, the operator advances.
    poll_twice(&mut [&mut a2]).await;
    let advanced = app.press("advance", &id).await;
    assert_eq!(advanced["current_stage"], 1);
    let results = &advanced["stages"][0]["evaluations"][1]["results"];
    assert_eq!(results[1]["reason"], "2 of 2 nodes run v2");
}

#[tokio::test]
async fn a_stage_may_ask_for_fewer_applied_nodes() {
    let app = TestApp::spawn().await;
    let mut a1 = app.start_simulated_agent("wave-a1", &[("wave", "a")]).await;
    let mut a2 = app.start_simulated_agent("wave-a2", &[("wave", "a")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut a1, &mut a2]).await;
    let mut first = wave("a", json!([]));
    first["minAppliedPercent"] = json!(50);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [first, wave("b", json!([]))]},
        }))
        .await;
    poll_twice(&mut [&mut a1]).await;
    assert_eq!(app.decide_after(30_000).await, "advance");
    let r = app.release(&id).await;
    assert_eq!(
        r["stages"][0]["evaluations"][0]["results"][0]["reason"],
        "1 of 2 nodes run v2"
    );
}

/// A real agent running pipelines with a shell command: a config containing `crash: true`
/// prints an error and exits at once; any other stays up.
fn crashing_agent_options(app: &TestApp, hostname: &str) -> AgentOptions {
    AgentOptions {
        command: Some(
            "if grep -q 'crash: true' {config}; then echo 'error: sink out is unreachable' >&2; \
             exit 1; fi; exec sleep 60"
                .into(),
        ),
        poll_interval_override: Some(Duration::from_millis(100)),
        crash_policy: CrashPolicy {
            limit: 3,
            window: Duration::from_secs(60),
            healthy_after: Duration::from_millis(300),
            restart_delay: Duration::from_millis(50),
        },
        ..app.agent_options(hostname, &[("wave", "a")])
    }
}

/// The version `node_id` reported failed for `pipeline_id`, as stored.
async fn failed_version(app: &TestApp, node_id: &str, pipeline_id: &str) -> Option<i64> {
    app.control.db.heartbeats.settled().await;
    sqlx::query_scalar::<_, Option<i64>>(
        "SELECT failed_version FROM node_pipeline_status WHERE node_id = $1 AND pipeline_id = $2",
    )
    .bind(node_id)
    .bind(pipeline_id)
    .fetch_optional(&app.control.db.pool)
    .await
    .unwrap()
    .flatten()
}

async fn wait_for<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_real_agent_reverting_a_crashing_canary_rolls_the_release_back_at_the_next_tick() {
    let app = TestApp::spawn().await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "ok: 1\n").await;
    let agent = Agent::start(crashing_agent_options(&app, "edge-7"))
        .await
        .expect("agent enrolls");
    let node_id = agent.node_id().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(agent.run(async {
        let _ = stopped.await;
    }));
    // v1 runs long enough to be the agent's last good config.
    tokio::time::sleep(Duration::from_millis(800)).await;

    let plan = json!({"stages": [wave("a", json!([{"healthWindow": {}}])), wave("b", json!([]))]});
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "ok: 2\ncrash: true\n",
            "rollout_plan": plan,
        }))
        .await;
    wait_for("the agent to report v2 failed", || async {
        failed_version(&app, &node_id, &p.id).await == Some(2)
    })
    .await;
    // The crash report asked for a check: the very next tick, long before the 30 s deadline,
    // rolls the release back.
    let outcomes = releases::tick(&app.control, app.now()).await.unwrap();
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert_eq!(outcomes[0].decision.as_str(), "rollback");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "ROLLED_BACK");
    let failure = r["failure_reason"].as_str().unwrap();
    assert!(
        failure.starts_with(
            "stage 1 failed during its bake: canaryCrash: edge-7 reports v2 CRASHED: \
             exited 3 times within 60 s; last exit: code 1"
        ),
        "{failure}"
    );
    assert!(failure.contains("sink out is unreachable"), "{failure}");

    // The rollback's v3 (v1's config) reaches the agent, which runs it and drops the failure.
    wait_for("the agent to run v3", || async {
        failed_version(&app, &node_id, &p.id).await.is_none()
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap();
}
