//! [`Fixture`]: a database prepared through the `vf-control` library before any server
//! binary runs on it, with a manual clock set in the past, so stored bake deadlines land a
//! few seconds in the real future and no test waits out a 30 s bake. Closed (every pooled
//! connection released) before the binary starts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use vf_control::pipelines::{self, PipelineRow};
use vf_control::releases::{self, CanaryRequest, Release};
use vf_control::{agent, fleet, Actor, Control, Db, ManualClock, Settings};
use vf_protocol::{EnrollRequest, EnrollResponse};

/// The environment every server binary bootstraps (`VF_BOOTSTRAP_ENVIRONMENT`).
pub const ENVIRONMENT: &str = "test";
/// Its enrollment token (`VF_BOOTSTRAP_ENROLLMENT_TOKEN`).
pub const ENROLLMENT_TOKEN: &str = "vfe_process-enrollment-token-0123456789";
/// An admin API token of every environment (`VF_BOOTSTRAP_API_TOKEN`).
pub const API_TOKEN: &str = "vfa_process-admin-api-token-0123456789";
/// The shortest bake a plan may have, in milliseconds.
pub const BAKE_MS: i64 = 30_000;
/// The config of version 1 of every pipeline.
pub const V1: &str = "v: 1\n";

/// Real now, in unix milliseconds: the clock the server binary reads.
pub fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the wall clock is after 1970")
        .as_millis() as i64
}

/// The actor of everything the fixture does.
pub fn operator() -> Actor {
    Actor::system("token:fixture")
}

/// A stage baking [`BAKE_MS`].
pub fn stage(selector: Value, gates: Value) -> Value {
    json!({ "selector": selector, "bakeSeconds": BAKE_MS / 1000, "gates": gates })
}

/// A stage of `percent` % of the fleet passing when its bake window elapsed.
pub fn health_window_stage(percent: u32) -> Value {
    stage(
        json!({ "percentage": percent }),
        json!([{ "healthWindow": {} }]),
    )
}

/// The library's view of the database, with a clock the test sets.
pub struct Fixture {
    pub control: Control,
    pub clock: ManualClock,
    pub env_id: String,
}

impl Fixture {
    /// Connects (applying migrations), with the clock at `now_ms`, and creates the bootstrap
    /// environment with its enrollment token, as the binary's own bootstrap would.
    pub async fn open(database_url: &str, now_ms: i64) -> Fixture {
        let db = Db::connect(database_url)
            .await
            .expect("connect the fixture to the test database");
        let clock = ManualClock::new(now_ms);
        let control = Control::new(db, Arc::new(clock.clone()), Settings::default());
        let env = fleet::ensure_environment(&control.db, ENVIRONMENT, now_ms)
            .await
            .unwrap();
        fleet::create_enrollment_token(
            &control.db,
            &operator(),
            &env.id,
            Some(ENROLLMENT_TOKEN),
            "bootstrap",
            now_ms,
        )
        .await
        .unwrap();
        Fixture {
            control,
            clock,
            env_id: env.id,
        }
    }

    /// Reconnects to read what the binaries left (no bootstrap writes).
    pub async fn reopen(database_url: &str) -> Fixture {
        let db = Db::connect(database_url)
            .await
            .expect("reconnect to the test database");
        let now = wall_clock_ms();
        let clock = ManualClock::new(now);
        let control = Control::new(db, Arc::new(clock.clone()), Settings::default());
        let env_id = fleet::list_environments(&control.db)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.name == ENVIRONMENT)
            .expect("the bootstrap environment exists")
            .id;
        Fixture {
            control,
            clock,
            env_id,
        }
    }

    pub fn now(&self) -> i64 {
        self.control.now()
    }

    /// Enrolls a node through the library (what `POST /api/agent/enroll` calls).
    pub async fn enroll(&self, hostname: &str) -> EnrollResponse {
        let request = EnrollRequest {
            token: ENROLLMENT_TOKEN.to_string(),
            hostname: hostname.to_string(),
            os: Some("linux".to_string()),
            agent_version: Some("1.2.3".to_string()),
            vector_version: None,
            labels: None,
        };
        agent::enroll(&self.control.db, request, 5_000, self.now())
            .await
            .unwrap()
    }

    /// A pipeline of every node of the environment, with [`V1`] deployed.
    pub async fn pipeline_on_v1(&self, name: &str) -> PipelineRow {
        let db = &self.control.db;
        let p = pipelines::create_pipeline(
            db,
            &operator(),
            &self.env_id,
            name,
            BTreeMap::new(),
            self.now(),
        )
        .await
        .unwrap();
        pipelines::deploy(db, &operator(), &p.id, V1, "first deploy", self.now())
            .await
            .unwrap();
        p
    }

    /// A release of `config_yaml` with `plan`, created now (the fixture's clock).
    /// A release of `config_yaml` by `plan`. The fixture's nodes are enrolled but report no
    /// pipeline, so proof of apply is off (`minAppliedPercent: 0`) unless the plan says.
    pub async fn create_release(
        &self,
        pipeline_id: &str,
        config_yaml: &str,
        mut plan: Value,
    ) -> Release {
        if plan.get("minAppliedPercent").is_none() {
            plan["minAppliedPercent"] = 0.into();
        }
        releases::create_canary(
            &self.control,
            &operator(),
            CanaryRequest {
                pipeline_id: pipeline_id.to_string(),
                config_yaml: config_yaml.to_string(),
                changelog: "process test".to_string(),
                rollout_plan: Some(plan),
                ..CanaryRequest::default()
            },
        )
        .await
        .unwrap()
    }

    pub async fn release(&self, id: &str) -> Release {
        releases::get_release(&self.control, id).await.unwrap()
    }

    /// Releases every pooled connection: on SQLite the binary must be the only writer.
    pub async fn close(self) {
        self.control.db.pool.close().await;
    }
}
