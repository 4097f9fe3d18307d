//! Every config answer is assembled from one consistent view of the node's pipelines and
//! their in-flight releases. Pollers hammer `GET /api/agent/config` while completes,
//! rollbacks, direct deploys and first-deploy completes commit; every answer is recorded,
//! and no node ever sees a pipeline's version step back or a pipeline it was running
//! vanish (a first deploy rolled back is the one case where a pipeline may go away, and
//! this test does not roll one back).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use vf_control::releases;
use vf_control::testing::{fencing_violations, ServedVersions};
use vf_rules::Action;

use crate::helpers::{operator, TestApp};
use crate::releases::wave;

/// `pipeline id -> version` of one answer.
type Answer = ServedVersions;

const RELEASES: usize = 12;
const NODES: usize = 6;

/// Every answer the node got, in order (from the one server: no label).
async fn poll_until(url: String, token: String, stop: Arc<AtomicBool>) -> Vec<(String, Answer)> {
    let client = reqwest::Client::new();
    let mut answers = Vec::new();
    // One more round after the stop, so every node also sees the final state.
    let mut last_round = false;
    loop {
        if last_round {
            break;
        }
        last_round = stop.load(Ordering::SeqCst);
        let resp = client
            .get(format!("{url}/api/agent/config"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let doc: Value = resp.json().await.unwrap();
        let answer = doc["pipelines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["pipelineId"].as_str().unwrap().to_string(),
                    p["version"].as_i64().unwrap(),
                )
            })
            .collect();
        answers.push((String::new(), answer));
    }
    answers
}

async fn no_node_sees_a_version_step_back_while_transitions_commit(app: TestApp) {
    let mut tokens = Vec::new();
    for i in 0..NODES {
        let w = if i % 2 == 0 { "a" } else { "b" };
        tokens.push(
            app.enroll(&format!("edge-{i}"), &[("wave", w)])
                .await
                .node_token,
        );
    }
    // The pollers only fetch configs and never report, so proof of apply is off.
    let one_stage = json!({
        "stages": [wave("a", json!([{"healthWindow": {}}]))],
        "minAppliedPercent": 0,
    });
    let mut ids = Vec::new();
    let mut direct = Vec::new();
    for i in 0..RELEASES {
        let p = app.create_pipeline(&format!("logs-{i}"), &[]).await;
        // Every fourth pipeline is a first deploy: withheld from wave b until it completes.
        if i % 4 != 3 {
            app.deploy(&p.id, "v: 1\n").await;
        }
        let (id, _) = app
            .create_release(json!({
                "pipeline_id": p.id, "config_yaml": "v: 2\n", "changelog": "v2",
                "rollout_plan": one_stage,
            }))
            .await;
        ids.push((i, id));
        let d = app.create_pipeline(&format!("direct-{i}"), &[]).await;
        app.deploy(&d.id, "v: 1\n").await;
        direct.push(d.id);
    }
    app.clock.advance_ms(31_000);

    let stop = Arc::new(AtomicBool::new(false));
    let pollers: Vec<_> = tokens
        .iter()
        .map(|t| tokio::spawn(poll_until(app.url.clone(), t.clone(), stop.clone())))
        .collect();
    for ((i, id), d) in ids.iter().zip(&direct) {
        // First deploys complete; the others alternate between complete and rollback.
        let action = if i % 4 == 3 || i % 2 == 0 {
            Action::Complete
        } else {
            Action::Rollback
        };
        releases::act(&app.control, &operator(), id, action)
            .await
            .unwrap()
            .expect("the release reads");
        app.deploy(d, "v: 2\n").await;
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::SeqCst);

    let mut all = Vec::new();
    let mut polls = 0;
    for (node, poller) in pollers.into_iter().enumerate() {
        let answers = poller.await.unwrap();
        polls += answers.len();
        all.extend(fencing_violations(&format!("node {node}"), &answers));
        let (_, last) = answers.last().unwrap();
        assert_eq!(
            last.len(),
            2 * RELEASES,
            "node {node} ends with every pipeline"
        );
    }
    assert!(
        polls >= NODES * 3,
        "the pollers ran during the transitions: {polls} polls"
    );
    assert!(
        all.is_empty(),
        "{} violations in {polls} polls:\n{}",
        all.len(),
        all.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_node_sees_a_version_step_back_while_transitions_commit_on_sqlite() {
    no_node_sees_a_version_step_back_while_transitions_commit(TestApp::spawn().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_node_sees_a_version_step_back_while_transitions_commit_on_postgres() {
    no_node_sees_a_version_step_back_while_transitions_commit(TestApp::spawn_postgres().await)
        .await;
}
