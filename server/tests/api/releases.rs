//! Progressive rollouts end to end through the JSON server functions, with real agents and
//! the scheduler stepped by a manual clock. This file holds the release helpers and the
//! three-stage story (on SQLite and PostgreSQL); the other `release_*` files hold the rest.

use serde_json::{json, Value};
use vf_agent::Agent;
use vf_control::audit::AuditRow;
use vf_control::pipelines;
use vf_control::releases;

use crate::helpers::{TestApp, OPERATOR};

impl TestApp {
    /// Calls a server function as the operator with a JSON body; returns the status and the
    /// body text.
    pub async fn call(&self, endpoint: &str, body: Value) -> (u16, String) {
        let resp = self
            .api
            .post(format!("{}/api/{endpoint}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    /// The node ids stage `index` (0-based) of the release added (`release.stage.nodes`).
    pub async fn stage_nodes(&self, release_id: &str, index: usize) -> Vec<String> {
        let page = self
            .call_ok(
                "release.stage.nodes",
                json!({"release_id": release_id, "stage": index + 1, "limit": 500}),
            )
            .await;
        serde_json::from_value(page["node_ids"].clone()).unwrap()
    }

    /// Calls a server function that must succeed and parses its JSON answer.
    pub async fn call_ok(&self, endpoint: &str, body: Value) -> Value {
        let (status, text) = self.call(endpoint, body).await;
        assert_eq!(status, 200, "{endpoint}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Calls a server function that must fail with `status`; returns the message shown to the
    /// operator (the body is `ServerError|<message>`).
    pub async fn call_refused(&self, endpoint: &str, body: Value, status: u16) -> String {
        let (got, text) = self.call(endpoint, body).await;
        assert_eq!(got, status, "{endpoint}: {text}");
        text.strip_prefix("ServerError|")
            .unwrap_or_else(|| panic!("{endpoint}: not a server error body: {text}"))
            .to_string()
    }

    /// Moves the clock and runs one scheduler step; returns the transitions it made (gate
    /// checks during a bake that decided nothing are left out).
    pub async fn tick_after(&self, ms: i64) -> Vec<releases::TickOutcome> {
        self.clock.advance_ms(ms);
        let outcomes = releases::tick(&self.control, self.now()).await.unwrap();
        (outcomes.into_iter())
            .filter(|o| o.decision != releases::Ticked::Checked)
            .collect()
    }

    /// One scheduler step that must decide exactly one release; returns the decision.
    pub async fn decide_after(&self, ms: i64) -> String {
        let outcomes = self.tick_after(ms).await;
        assert_eq!(outcomes.len(), 1, "{outcomes:?}");
        outcomes[0].decision.as_str().to_string()
    }

    /// `release.canary.create` that must succeed; returns the release id and the view.
    pub async fn create_release(&self, body: Value) -> (String, Value) {
        let release = self.call_ok("release.canary.create", body).await;
        let id = release["id"].as_str().unwrap().to_string();
        (id, release)
    }

    /// The release as `release.canary.get` shows it now.
    pub async fn release(&self, id: &str) -> Value {
        self.call_ok("release.canary.get", json!({ "release_id": id }))
            .await
    }

    /// An operator action (`advance`, `complete`, `broaden`, `rollback`) that must succeed.
    pub async fn press(&self, action: &str, id: &str) -> Value {
        self.call_ok(
            &format!("release.canary.{action}"),
            json!({ "release_id": id }),
        )
        .await
    }

    /// Every version of the pipeline as `(number, config)`, oldest first.
    pub async fn versions(&self, pipeline_id: &str) -> Vec<(i64, String)> {
        let mut versions: Vec<(i64, String)> =
            pipelines::list_versions(&self.control.db, pipeline_id)
                .await
                .unwrap()
                .into_iter()
                .map(|v| (v.version, v.config_yaml))
                .collect();
        versions.sort();
        versions
    }

    pub async fn deployed_version(&self, pipeline_id: &str) -> Option<i64> {
        pipelines::get_pipeline(&self.control.db, pipeline_id)
            .await
            .unwrap()
            .deployed_version
    }

    /// The release's audit events, oldest first.
    pub async fn release_audit(&self, release_id: &str) -> Vec<AuditRow> {
        let mut rows =
            vf_control::testing::audit_for_target(&self.control.db, "release", release_id, 50)
                .await
                .unwrap();
        rows.reverse();
        rows
    }

    /// What the agent `hostname` has on disk for the pipeline (None: no file).
    pub fn file_on_disk(&self, hostname: &str, pipeline_id: &str) -> Option<String> {
        std::fs::read_to_string(self.pipeline_file(hostname, pipeline_id)).ok()
    }
}

/// The version each agent was served of `pipeline_id` on its last poll (None: absent).
pub fn served_version(agent: &Agent, pipeline_id: &str) -> Option<i64> {
    agent
        .last_config()
        .and_then(|c| c.pipelines.iter().find(|p| p.pipeline_id == pipeline_id))
        .map(|p| p.version)
}

/// [`served_version`] of each agent, in order.
pub fn served(agents: &[&Agent], pipeline_id: &str) -> Vec<Option<i64>> {
    agents
        .iter()
        .map(|a| served_version(a, pipeline_id))
        .collect()
}

/// Two simulated agents labelled `wave=a` and `wave=b`, both running v1 of a new pipeline
/// `logs`: the starting point of most release scenarios.
pub async fn two_waves_on_v1(app: &TestApp) -> (Agent, Agent, vf_control::pipelines::PipelineRow) {
    let mut a = app.start_simulated_agent("wave-a", &[("wave", "a")]).await;
    let mut b = app.start_simulated_agent("wave-b", &[("wave", "b")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(1), Some(1)]);
    (a, b, p)
}

pub async fn poll_all(agents: &mut [&mut Agent]) {
    for a in agents.iter_mut() {
        a.poll_once().await.unwrap();
    }
}

/// Two polls of every agent: the first fetches what is served, the second reports traffic
/// of it (a simulated agent counts 100 events per poll of the version it runs).
pub async fn poll_twice(agents: &mut [&mut Agent]) {
    poll_all(agents).await;
    poll_all(agents).await;
}

/// A stage of a plan baking 30 s.
pub fn stage(selector: Value, gates: Value) -> Value {
    json!({ "selector": selector, "bakeSeconds": 30, "gates": gates })
}

/// A stage targeting the nodes labelled `wave=<wave>`.
pub fn wave(wave: &str, gates: Value) -> Value {
    stage(json!({ "labels": { "wave": wave } }), gates)
}

/// A config whose simulated nodes report half their events as errors.
pub const BAD_CONFIG: &str = "v: 2\n# vf-simulate: error_rate=0.5\n";

/// The gate results of one evaluation of one stage (0-based indexes).
pub fn results(release: &Value, stage: usize, evaluation: usize) -> &Value {
    &release["stages"][stage]["evaluations"][evaluation]["results"]
}

/// The audit action names, oldest first.
pub fn actions(rows: &[AuditRow]) -> Vec<&str> {
    rows.iter().map(|r| r.action.as_str()).collect()
}

pub fn details(row: &AuditRow) -> Value {
    serde_json::from_str(&row.details).unwrap()
}

async fn three_stage_plan_opens_each_stage_in_turn_and_completes(app: TestApp) {
    let mut a = app.start_simulated_agent("wave-a", &[("wave", "a")]).await;
    let mut b = app.start_simulated_agent("wave-b", &[("wave", "b")]).await;
    let mut c = app.start_simulated_agent("wave-c", &[("wave", "c")]).await;
    let p = app.create_pipeline("logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(served(&[&a, &b, &c], &p.id), [Some(1), Some(1), Some(1)]);

    let gates = json!([{"healthWindow": {}}, {"errorRate": {"maxPercent": 5}}]);
    let (id, release) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "changelog": "three waves",
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates.clone()), wave("c", gates)]},
        }))
        .await;
    assert_eq!(release["status"], "CANARY_DEPLOYED");
    assert_eq!(release["canary_version"], 2);
    assert_eq!(release["previous_version"], 1);

    // Stage 1: only wave a gets v2.
    poll_twice(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(served(&[&a, &b, &c], &p.id), [Some(2), Some(1), Some(1)]);
    // Not yet due: nothing happens.
    assert!(app.tick_after(10_000).await.is_empty());
    assert_eq!(app.decide_after(20_000).await, "advance");

    // Stage 2: waves a and b.
    poll_twice(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(served(&[&a, &b, &c], &p.id), [Some(2), Some(2), Some(1)]);
    assert_eq!(app.decide_after(30_000).await, "advance");
    poll_twice(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(served(&[&a, &b, &c], &p.id), [Some(2), Some(2), Some(2)]);
    assert_eq!(app.decide_after(30_000).await, "complete");

    let done = app.release(&id).await;
    assert_eq!(done["status"], "BROADENED");
    assert_eq!(done["stages"].as_array().unwrap().len(), 3);
    for (i, node) in [&a, &b, &c].into_iter().enumerate() {
        assert_eq!(done["stages"][i]["node_count"], 1);
        assert_eq!(app.stage_nodes(&id, i).await, [node.node_id()]);
        assert_eq!(done["stages"][i]["outcome"], "passed");
        let gates = results(&done, i, 0);
        assert_eq!(gates[1]["gate"], "errorRate");
        assert_eq!(gates[1]["verdict"], "pass", "{gates}");
    }
    assert_eq!(app.deployed_version(&p.id).await, Some(2));
    poll_all(&mut [&mut a, &mut b, &mut c]).await;
    assert_eq!(served(&[&a, &b, &c], &p.id), [Some(2), Some(2), Some(2)]);
    assert_eq!(app.file_on_disk("wave-c", &p.id).as_deref(), Some("v: 2\n"));

    // The audit log tells the story: who created it, each scheduler step with its evidence.
    let log = app.release_audit(&id).await;
    assert_eq!(
        actions(&log),
        [
            "release.create",
            "release.advance",
            "release.advance",
            "release.complete"
        ]
    );
    assert_eq!(log[0].actor, OPERATOR);
    let created = details(&log[0]);
    assert_eq!(created["canaryVersion"], 2);
    assert_eq!(created["previousVersion"], 1);
    assert_eq!(created["stage1Nodes"], json!([a.node_id()]));
    for (row, stage) in log[1..].iter().zip(1..) {
        assert_eq!(row.actor, "scheduler");
        let d = details(row);
        assert_eq!(d["stage"], stage);
        assert_eq!(d["gateResults"][1]["gate"], "errorRate");
        assert_eq!(d["gateResults"][1]["verdict"], "pass");
    }
    assert_eq!(details(&log[3])["to"], "BROADENED");

    // /metrics tells the same story: the release's status and every gate verdict.
    let metrics = app
        .api
        .get(format!("{}/metrics", app.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"vectorflow_release_status{pipeline="logs",status="BROADENED"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"vectorflow_gate_results_total{gate="errorRate",verdict="pass"} 3"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"vectorflow_release_transitions_total{action="release.complete"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_three_stage_plan_opens_each_stage_in_turn_and_completes() {
    three_stage_plan_opens_each_stage_in_turn_and_completes(TestApp::spawn().await).await;
}

#[tokio::test]
async fn a_three_stage_plan_opens_each_stage_in_turn_and_completes_on_postgres() {
    three_stage_plan_opens_each_stage_in_turn_and_completes(TestApp::spawn_postgres().await).await;
}
