//! Who a stage targets: percentage stages ranked per release and cumulative, node-group
//! stages, the pipeline's nodeSelector applied first, and late joiners left untargeted.

use std::collections::BTreeSet;

use serde_json::json;
use vf_agent::Agent;
use vf_control::fleet;

use crate::helpers::{labels, operator, TestApp};
use crate::releases::{poll_all, poll_twice, served, stage};

async fn node_ids(app: &TestApp, release_id: &str, stage: usize) -> BTreeSet<String> {
    app.stage_nodes(release_id, stage)
        .await
        .into_iter()
        .collect()
}

fn ids(agents: &[&Agent]) -> BTreeSet<String> {
    agents.iter().map(|a| a.node_id().to_string()).collect()
}

#[tokio::test]
async fn percentage_stages_target_half_the_fleet_then_the_rest_without_dropping_anyone() {
    let app = TestApp::spawn().await;
    let mut n1 = app.start_agent("n1", &[]).await;
    let mut n2 = app.start_agent("n2", &[]).await;
    let mut n3 = app.start_agent("n3", &[]).await;
    let mut n4 = app.start_agent("n4", &[]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut n1, &mut n2, &mut n3, &mut n4]).await;
    assert_eq!(served(&[&n1, &n2, &n3, &n4], &p.id), [Some(1); 4]);

    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [
                stage(json!({"percentage": 50}), json!([{"healthWindow": {}}])),
                stage(json!({"percentage": 100}), json!([{"healthWindow": {}}])),
            ]},
        }))
        .await;
    let first = node_ids(&app, &id, 0).await;
    assert_eq!(first.len(), 2);
    // The two nodes first in this release's order: sha256(releaseId:nodeId) ascending.
    let mut ranked: Vec<(String, String)> = ids(&[&n1, &n2, &n3, &n4])
        .into_iter()
        .map(|n| (vf_rules::rank_key(&id, &n), n))
        .collect();
    ranked.sort();
    let lowest: BTreeSet<String> = ranked.into_iter().take(2).map(|(_, n)| n).collect();
    assert_eq!(first, lowest);

    let expect = |agents: &[&Agent], targeted: &BTreeSet<String>| -> Vec<Option<i64>> {
        agents
            .iter()
            .map(|a| Some(if targeted.contains(a.node_id()) { 2 } else { 1 }))
            .collect()
    };
    poll_twice(&mut [&mut n1, &mut n2, &mut n3, &mut n4]).await;
    let fleet = [&n1, &n2, &n3, &n4];
    assert_eq!(served(&fleet, &p.id), expect(&fleet, &first));

    assert_eq!(app.decide_after(30_000).await, "advance");
    // A node that enrolls after the last stage started is not targeted until the release
    // leaves flight.
    let mut late = app.start_agent("late", &[]).await;
    assert_eq!(app.release(&id).await["stages"][1]["node_count"], 2);
    let second = node_ids(&app, &id, 1).await;
    assert_eq!(second.len(), 2);
    assert!(first.is_disjoint(&second));
    assert_eq!(
        first.union(&second).cloned().collect::<BTreeSet<_>>(),
        ids(&[&n1, &n2, &n3, &n4])
    );
    poll_twice(&mut [&mut n1, &mut n2, &mut n3, &mut n4, &mut late]).await;
    assert_eq!(
        served(&[&n1, &n2, &n3, &n4, &late], &p.id),
        [Some(2), Some(2), Some(2), Some(2), Some(1)]
    );

    assert_eq!(app.decide_after(30_000).await, "complete");
    poll_all(&mut [&mut n1, &mut n2, &mut n3, &mut n4, &mut late]).await;
    assert_eq!(served(&[&n1, &n2, &n3, &n4, &late], &p.id), [Some(2); 5]);
}

#[tokio::test]
async fn a_node_group_stage_targets_the_groups_nodes_within_the_pipelines_selection() {
    let app = TestApp::spawn().await;
    let mut edge1 = app
        .start_agent("edge-1", &[("tier", "edge"), ("env", "prod")])
        .await;
    let mut edge2 = app
        .start_agent("edge-2", &[("tier", "edge"), ("env", "prod")])
        .await;
    let mut core = app
        .start_agent("core-1", &[("tier", "core"), ("env", "prod")])
        .await;
    // In the group, but the pipeline's nodeSelector never admits it.
    let mut dev = app
        .start_agent("edge-dev", &[("tier", "edge"), ("env", "dev")])
        .await;
    let group = fleet::create_node_group(
        &app.control.db,
        &operator(),
        &app.env_id,
        "edge",
        labels(&[("tier", "edge")]),
        app.now(),
    )
    .await
    .unwrap();
    let p = app.create_pipeline("logs", &[("env", "prod")]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut edge1, &mut edge2, &mut core, &mut dev]).await;
    assert_eq!(
        served(&[&edge1, &edge2, &core, &dev], &p.id),
        [Some(1), Some(1), Some(1), None]
    );

    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [
                stage(json!({"nodeGroup": group.id}), json!([])),
                stage(json!({"percentage": 100}), json!([])),
            ]},
        }))
        .await;
    assert_eq!(node_ids(&app, &id, 0).await, ids(&[&edge1, &edge2]));
    poll_twice(&mut [&mut edge1, &mut edge2, &mut core, &mut dev]).await;
    assert_eq!(
        served(&[&edge1, &edge2, &core, &dev], &p.id),
        [Some(2), Some(2), Some(1), None]
    );
    assert!(!app.pipeline_file("edge-dev", &p.id).exists());

    assert_eq!(app.decide_after(30_000).await, "advance");
    assert_eq!(node_ids(&app, &id, 1).await, ids(&[&core]));
    poll_twice(&mut [&mut edge1, &mut edge2, &mut core, &mut dev]).await;
    assert_eq!(
        served(&[&edge1, &edge2, &core, &dev], &p.id),
        [Some(2), Some(2), Some(2), None]
    );
    assert_eq!(app.decide_after(30_000).await, "complete");
    poll_all(&mut [&mut edge1, &mut edge2, &mut core, &mut dev]).await;
    assert_eq!(
        served(&[&edge1, &edge2, &core, &dev], &p.id),
        [Some(2), Some(2), Some(2), None]
    );
}

#[tokio::test]
async fn deleting_a_node_group_a_later_stage_names_never_leaves_the_release_stuck_baking() {
    let app = TestApp::spawn().await;
    let mut a = app.start_agent("wave-a", &[("wave", "a")]).await;
    let mut edge = app.start_agent("edge-1", &[("tier", "edge")]).await;
    let group = fleet::create_node_group(
        &app.control.db,
        &operator(),
        &app.env_id,
        "edge",
        labels(&[("tier", "edge")]),
        app.now(),
    )
    .await
    .unwrap();
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "rollout_plan": {"stages": [
                stage(json!({"labels": {"wave": "a"}}), json!([])),
                stage(json!({"nodeGroup": group.id}), json!([])),
            ]},
        }))
        .await;
    poll_twice(&mut [&mut a, &mut edge]).await;
    assert_eq!(served(&[&a, &edge], &p.id), [Some(2), Some(1)]);

    let deleted =
        fleet::delete_node_group(&app.control.db, &operator(), &group.id, app.now()).await;
    let outcomes = app.tick_after(30_000).await;
    let r = app.release(&id).await;
    if deleted.is_err() {
        // Refusing the deletion is fine: then stage 2 opens as planned.
        assert_eq!(outcomes[0].decision.as_str(), "advance");
        poll_all(&mut [&mut a, &mut edge]).await;
        assert_eq!(served(&[&a, &edge], &p.id), [Some(2), Some(2)]);
        return;
    }
    // Otherwise the scheduler must decide something an operator can see, not retry forever.
    assert_eq!(outcomes.len(), 1, "{outcomes:?}; release: {r}");
    let reason = format!("{} {}", r["hold_reason"], r["failure_reason"]);
    assert!(reason.contains("node group"), "{reason}");
    // Held (still fenced) or rolled back (everyone on the reverted v3).
    let expected = match r["status"].as_str() {
        Some("HEALTH_CHECK") => [Some(2), Some(1)],
        Some("ROLLED_BACK") => [Some(3), Some(3)],
        other => panic!("stuck in {other:?}: {r}"),
    };
    poll_all(&mut [&mut a, &mut edge]).await;
    assert_eq!(served(&[&a, &edge], &p.id), expected);
}
