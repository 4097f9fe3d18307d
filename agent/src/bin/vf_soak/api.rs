//! The operator side of a soak: server functions (`POST /api/<name>`, docs/api.md) called
//! with the admin API token, and the few fields of their answers the soak reads.

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A pipeline as `pipeline.create` and `pipeline.list` answer it.
#[derive(Debug, Clone, Deserialize)]
pub struct Pipeline {
    pub id: String,
    pub deployed_version: Option<i64>,
}

/// A version as `pipeline.deploy` answers it.
#[derive(Debug, Clone, Deserialize)]
pub struct Version {
    pub version: i64,
}

/// The release row as `release.canary.get` answers it: enough to know, for every moment,
/// which node may be served which version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Release {
    pub id: String,
    pub canary_version: i64,
    pub previous_version: Option<i64>,
    pub status: String,
    pub current_stage: i64,
    pub stage_count: i64,
    /// Started stages only; each holds the node ids it added.
    pub stages: Vec<Stage>,
    pub created_at: i64,
    pub updated_at: i64,
    pub completed_at: Option<i64>,
    pub row_version: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    pub index: i64,
    /// Read page by page from `release.stage.nodes` (the release only counts them).
    #[serde(default)]
    pub node_ids: Vec<String>,
    pub started_at: i64,
}

impl Release {
    pub fn in_flight(&self) -> bool {
        matches!(self.status.as_str(), "CANARY_DEPLOYED" | "HEALTH_CHECK")
    }
}

/// A client of the server functions, authenticated with an API token.
pub struct Admin {
    http: reqwest::Client,
    base: String,
    token: String,
    /// Node ids of started stages, by release and stage: fixed once a stage starts.
    stage_nodes: std::sync::Mutex<std::collections::HashMap<(String, i64), Vec<String>>>,
}

impl Admin {
    pub fn new(http: reqwest::Client, base: &str, token: &str) -> Admin {
        Admin {
            http,
            base: base.to_string(),
            token: token.to_string(),
            stage_nodes: Default::default(),
        }
    }

    async fn call<T: DeserializeOwned>(&self, name: &str, args: Value) -> Result<T> {
        let response = self
            .http
            .post(format!("{}/api/{name}", self.base))
            .bearer_auth(&self.token)
            .json(&args)
            .send()
            .await
            .with_context(|| format!("{name}: no answer from the server"))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .with_context(|| format!("{name}: reading the answer"))?;
        if !status.is_success() {
            bail!("{name}: {status}: {body}");
        }
        serde_json::from_str(&body).with_context(|| format!("{name}: unexpected answer {body}"))
    }

    pub async fn create_pipeline(
        &self,
        environment_id: &str,
        name: &str,
        selector: Value,
    ) -> Result<Pipeline> {
        let args =
            json!({"environment_id": environment_id, "name": name, "node_selector": selector});
        self.call("pipeline.create", args).await
    }

    pub async fn deploy(&self, pipeline_id: &str, config_yaml: &str) -> Result<Version> {
        let args =
            json!({"pipeline_id": pipeline_id, "config_yaml": config_yaml, "changelog": "soak v1"});
        self.call("pipeline.deploy", args).await
    }

    pub async fn create_release(
        &self,
        pipeline_id: &str,
        config_yaml: &str,
        plan: Value,
    ) -> Result<Release> {
        let args = json!({
            "pipeline_id": pipeline_id,
            "config_yaml": config_yaml,
            "changelog": "soak v2",
            "rollout_plan": plan,
        });
        let release = self.call("release.canary.create", args).await?;
        self.with_stage_nodes(release).await
    }

    pub async fn release(&self, release_id: &str) -> Result<Release> {
        let release = self
            .call("release.canary.get", json!({"release_id": release_id}))
            .await?;
        self.with_stage_nodes(release).await
    }

    /// Fills in each started stage's node ids, read once per stage.
    async fn with_stage_nodes(&self, mut release: Release) -> Result<Release> {
        for stage in &mut release.stages {
            let key = (release.id.clone(), stage.index);
            let known = self.lock_stage_nodes().get(&key).cloned();
            let ids = match known {
                Some(ids) => ids,
                None => {
                    let ids = self.read_stage_nodes(&release.id, stage.index).await?;
                    self.lock_stage_nodes().insert(key, ids.clone());
                    ids
                }
            };
            stage.node_ids = ids;
        }
        Ok(release)
    }

    async fn read_stage_nodes(&self, release_id: &str, index: i64) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct Page {
            total: usize,
            node_ids: Vec<String>,
        }
        let mut ids = Vec::new();
        loop {
            let args = json!({"release_id": release_id, "stage": index + 1, "offset": ids.len(), "limit": 500});
            let page: Page = self.call("release.stage.nodes", args).await?;
            let done = page.node_ids.is_empty() || ids.len() + page.node_ids.len() >= page.total;
            ids.extend(page.node_ids);
            if done {
                return Ok(ids);
            }
        }
    }

    fn lock_stage_nodes(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, i64), Vec<String>>> {
        self.stage_nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The deployed version now (after a rollback, the reverted config's new version).
    pub async fn deployed_version(
        &self,
        environment_id: &str,
        pipeline_id: &str,
    ) -> Result<Option<i64>> {
        let all: Vec<Pipeline> = self
            .call("pipeline.list", json!({"environment_id": environment_id}))
            .await?;
        Ok(all
            .into_iter()
            .find(|p| p.id == pipeline_id)
            .and_then(|p| p.deployed_version))
    }
}

/// The progressive plan the soak releases with: 10 % / 50 % / 100 %, each baking `bake_secs`
/// behind a health-window gate, advancing on its own.
pub fn soak_plan(bake_secs: u64) -> Value {
    let stage = |percentage: u32| {
        json!({
            "selector": {"percentage": percentage},
            "bakeSeconds": bake_secs,
            "gates": [{"healthWindow": {}}],
        })
    };
    json!({
        "stages": [stage(10), stage(50), stage(100)],
        "autoAdvance": true,
        "autoRollbackOnGateFail": true,
    })
}
