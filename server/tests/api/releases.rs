//! Progressive rollouts end to end through the JSON server functions, with real agents and
//! the scheduler stepped by a manual clock.

use serde_json::{json, Value};
use vf_agent::Agent;
use vf_control::releases;

use crate::helpers::TestApp;

impl TestApp {
    /// Calls a server function with a JSON body; returns the status and the body text.
    pub async fn call(&self, endpoint: &str, body: Value) -> (u16, String) {
        let resp = self
            .client
            .post(format!("{}/api/{endpoint}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    /// Calls a server function that must succeed and parses its JSON answer.
    pub async fn call_ok(&self, endpoint: &str, body: Value) -> Value {
        let (status, text) = self.call(endpoint, body).await;
        assert_eq!(status, 200, "{endpoint}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Moves the clock and runs one scheduler step.
    pub async fn tick_after(&self, ms: i64) -> Vec<releases::TickOutcome> {
        self.clock.advance_ms(ms);
        releases::tick(&self.control, self.now()).await.unwrap()
    }
}

/// The version each agent was served of `pipeline_id` on its last poll (None: absent).
pub fn served_version(agent: &Agent, pipeline_id: &str) -> Option<i64> {
    agent
        .last_config()
        .and_then(|c| c.pipelines.iter().find(|p| p.pipeline_id == pipeline_id))
        .map(|p| p.version)
}

pub async fn poll_all(agents: &mut [&mut Agent]) {
    for a in agents.iter_mut() {
        a.poll_once().await.unwrap();
    }
}

#[tokio::test]
async fn a_three_stage_plan_opens_each_stage_in_turn_and_completes() {
    let app = TestApp::spawn().await;
    let mut a = app.start_simulated_agent("wave-a", &[("wave", "a")]).await;
    let mut b = app.start_simulated_agent("wave-b", &[("wave", "b")]).await;
    let mut c = app.start_simulated_agent("wave-c", &[("wave", "c")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut a, &mut b, &mut c]).await;

    let stage = |wave: &str| json!({"selector": {"labels": {"wave": wave}}, "bakeSeconds": 30, "gates": [{"healthWindow": {}}, {"errorRate": {"maxPercent": 5}}]});
    let release = app
        .call_ok(
            "release.canary.create",
            json!({
                "pipeline_id": p.id,
                "config_yaml": "v: 2\n",
                "changelog": "three waves",
                "rollout_plan": {"stages": [stage("a"), stage("b"), stage("c")]},
            }),
        )
        .await;
    let id = release["id"].as_str().unwrap().to_string();
    assert_eq!(release["status"], "CANARY_DEPLOYED");
    assert_eq!(release["canary_version"], 2);
    assert_eq!(release["previous_version"], 1);

    // Stage 1: only wave a gets v2.
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(
        [
            served_version(&a, &p.id),
            served_version(&b, &p.id),
            served_version(&c, &p.id)
        ],
        [Some(2), Some(1), Some(1)]
    );
    // Not yet due: nothing happens.
    assert!(app.tick_after(10_000).await.is_empty());
    let outcomes = app.tick_after(20_000).await;
    let r = app
        .call_ok("release.canary.get", json!({"release_id": id}))
        .await;
    assert_eq!(outcomes[0].decision, "advance", "{}", r["stages"]);

    // Stage 2: waves a and b.
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(
        [
            served_version(&a, &p.id),
            served_version(&b, &p.id),
            served_version(&c, &p.id)
        ],
        [Some(2), Some(2), Some(1)]
    );
    assert_eq!(app.tick_after(30_000).await[0].decision, "advance");
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(app.tick_after(30_000).await[0].decision, "complete");

    let done = app
        .call_ok("release.canary.get", json!({"release_id": id}))
        .await;
    assert_eq!(done["status"], "BROADENED");
    assert_eq!(done["stages"].as_array().unwrap().len(), 3);
    let gates = &done["stages"][0]["evaluations"][0]["results"];
    assert_eq!(gates[1]["gate"], "errorRate");
    assert_eq!(gates[1]["verdict"], "pass");
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(
        [
            served_version(&a, &p.id),
            served_version(&b, &p.id),
            served_version(&c, &p.id)
        ],
        [Some(2), Some(2), Some(2)]
    );
}
