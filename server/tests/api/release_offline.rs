//! Offline and departed nodes cannot stall a release: simulated agents that stop polling
//! mid-stage are excluded (and named), hold the stage when too many are gone, or fail it, as
//! the plan's `offlineNodes` says; a revoked node leaves every count at once.

use serde_json::{json, Value};
use vf_agent::Agent;

use crate::helpers::TestApp;
use crate::releases::{poll_all, wave};

/// `n` simulated agents labelled `wave=a`, and one `wave=b`, all running v1 of `logs`.
async fn fleet_on_v1(app: &TestApp, n: usize) -> (Vec<Agent>, String) {
    let mut agents = Vec::new();
    for i in 0..n {
        agents.push(
            app.start_simulated_agent(&format!("wave-a{i}"), &[("wave", "a")])
                .await,
        );
    }
    agents.push(app.start_simulated_agent("wave-b", &[("wave", "b")]).await);
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut agents.iter_mut().collect::<Vec<_>>()).await;
    (agents, p.id)
}

/// A release of v2 whose first stage is every `wave=a` node, with the offline fields given.
async fn release(app: &TestApp, pipeline_id: &str, offline: Value) -> String {
    let mut plan = json!({"stages": [
        wave("a", json!([{"healthWindow": {}}])),
        wave("b", json!([])),
    ]});
    for (key, value) in offline.as_object().into_iter().flatten() {
        plan[key] = value.clone();
    }
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": pipeline_id,
            "config_yaml": "v: 2\n",
            "rollout_plan": plan,
        }))
        .await;
    id
}

/// The live agents poll twice (fetch v2, report it running) while `stopped` of them stay
/// silent; then the bake ends and the live ones poll once more.
async fn bake_with_stopped(app: &TestApp, agents: &mut [Agent], stopped: usize) {
    let live = agents.len() - 1 - stopped;
    for agent in agents[..live].iter_mut() {
        agent.poll_once().await.unwrap();
        agent.poll_once().await.unwrap();
    }
    app.clock.advance_ms(30_000);
    for agent in agents[..live].iter_mut() {
        agent.poll_once().await.unwrap();
    }
}

fn result<'a>(evaluation: &'a Value, gate: &str) -> &'a Value {
    evaluation["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["gate"] == gate)
        .unwrap_or_else(|| panic!("no {gate} result in {evaluation}"))
}

/// One of ten nodes stops polling in a stage whose rule comes to `exclude`: the stage
/// advances on the nine, and the evidence names the tenth.
async fn a_stopped_node_is_excluded_and_named(app: TestApp, offline: Value) {
    let (mut agents, p) = fleet_on_v1(&app, 10).await;
    let id = release(&app, &p, offline).await;
    bake_with_stopped(&app, &mut agents, 1).await;

    assert_eq!(app.decide_after(0).await, "advance");
    let r = app.release(&id).await;
    let evaluation = &r["stages"][0]["evaluations"][0];
    assert_eq!(
        result(evaluation, "applied")["reason"],
        "9 of 9 nodes run v2"
    );
    let offline = result(evaluation, "offlineNodes");
    assert_eq!(offline["verdict"], "pass");
    let reason = offline["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("1 of 10 nodes offline, excluded: wave-a9 since "),
        "{reason}"
    );
}

#[tokio::test]
async fn exclude_leaves_a_node_that_stopped_out_of_proof_of_apply_and_names_it() {
    let plan = json!({"offlineNodes": "exclude"});
    a_stopped_node_is_excluded_and_named(TestApp::spawn().await, plan).await;
}

#[tokio::test]
async fn exclude_holds_the_stage_when_more_than_max_offline_percent_stopped() {
    let app = TestApp::spawn().await;
    let (mut agents, p) = fleet_on_v1(&app, 10).await;
    let id = release(&app, &p, json!({"offlineNodes": "exclude"})).await;
    bake_with_stopped(&app, &mut agents, 2).await;

    assert_eq!(app.decide_after(0).await, "hold");
    let r = app.release(&id).await;
    let hold = r["hold_reason"].as_str().unwrap();
    assert!(
        hold.contains("2 of 10 nodes offline (20.00%, at most 10% may be excluded): wave-a8 since"),
        "{hold}"
    );
}

#[tokio::test]
async fn a_stage_with_offline_nodes_fail_rolls_back_naming_the_node() {
    let app = TestApp::spawn().await;
    let (mut agents, p) = fleet_on_v1(&app, 4).await;
    // The stage's own setting, over the server's default (wait on test servers).
    let mut stage = wave("a", json!([{"healthWindow": {}}]));
    stage["offlineNodes"] = json!("fail");
    stage["offlineAfterSeconds"] = json!(20);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [stage, wave("b", json!([]))]},
        }))
        .await;
    bake_with_stopped(&app, &mut agents, 1).await;

    assert_eq!(app.decide_after(0).await, "rollback");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "ROLLED_BACK");
    let evaluation = &r["stages"][0]["evaluations"][0];
    let offline = result(evaluation, "offlineNodes");
    assert_eq!(offline["verdict"], "fail");
    let reason = offline["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("1 of 4 nodes offline (offlineNodes: fail): wave-a3 since "),
        "{reason}"
    );
}

/// The server's default for plans that do not say (`VF_OFFLINE_NODES_DEFAULT`, exclude).
#[tokio::test]
async fn a_plan_that_does_not_say_takes_the_servers_default() {
    let app = TestApp::spawn_with(vf_control::testing::TestDb::sqlite(), |c| {
        c.offline_nodes_default = vf_rules::OfflinePolicy::Exclude;
    })
    .await;
    a_stopped_node_is_excluded_and_named(app, json!({})).await;
}

/// The test servers' default is wait (`Config::for_tests`), as `offlineNodes: "wait"` is.
#[tokio::test]
async fn wait_holds_for_a_stopped_node_and_a_revoked_one_leaves_every_count() {
    let app = TestApp::spawn().await;
    let (mut agents, p) = fleet_on_v1(&app, 3).await;
    let id = release(&app, &p, json!({})).await;
    bake_with_stopped(&app, &mut agents, 1).await;

    // Wait: the stage holds for the silent node, named as unreachable.
    assert_eq!(app.decide_after(0).await, "hold");
    let hold = app.release(&id).await["hold_reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        hold.contains("1 of 3 nodes have not applied v2: wave-a2 UNREACHABLE"),
        "{hold}"
    );

    // Revoked, it has departed: out of every count at once, and the operator can advance.
    let node_id = agents[2].node_id().to_string();
    app.call_ok("fleet.node.revoke", json!({ "node_id": node_id }))
        .await;
    let advanced = app.press("advance", &id).await;
    assert_eq!(advanced["current_stage"], 1);
    let evaluation = advanced["stages"][0]["evaluations"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        result(&evaluation, "applied")["reason"],
        "2 of 2 nodes run v2"
    );
    assert_eq!(
        result(&evaluation, "offlineNodes")["reason"],
        "1 departed (revoked or deleted), excluded: wave-a2"
    );
}
