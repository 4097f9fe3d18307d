//! The release row and the per-stage state stored on it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::Result;

/// A release as stored. `stages` is a JSON list of [`StageState`], one per started stage.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ReleaseRow {
    pub id: String,
    pub pipeline_id: String,
    pub canary_version: i64,
    pub previous_version: Option<i64>,
    pub status: String,
    pub plan: Option<String>,
    pub planless: i64,
    pub stages: String,
    pub current_stage: i64,
    pub bake_deadline: Option<i64>,
    pub baseline_eps: Option<f64>,
    pub hold_reason: Option<String>,
    pub failure_reason: Option<String>,
    pub created_by: String,
    pub updated_by: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub completed_at: Option<i64>,
    pub row_version: i64,
}

pub const RELEASE_COLUMNS: &str = "id, pipeline_id, canary_version, previous_version, status, \
    plan, planless, stages, current_stage, bake_deadline, baseline_eps, hold_reason, \
    failure_reason, created_by, updated_by, created_at, updated_at, completed_at, row_version";

/// What is recorded when a stage starts, and what its bake concluded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageState {
    pub index: i64,
    /// The node ids this stage added, materialised when it started.
    pub node_ids: Vec<String>,
    pub started_at: i64,
    pub bake_deadline: i64,
    #[serde(default)]
    pub gate_results: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

impl ReleaseRow {
    pub fn stage_states(&self) -> Vec<StageState> {
        serde_json::from_str(&self.stages).unwrap_or_default()
    }

    pub fn in_flight(&self) -> bool {
        matches!(self.status.as_str(), "CANARY_DEPLOYED" | "HEALTH_CHECK")
    }

    /// Every node any started stage targeted: the fencing set.
    pub fn targeted(&self) -> BTreeSet<String> {
        self.stage_states()
            .into_iter()
            .flat_map(|s| s.node_ids)
            .collect()
    }
}

/// The in-flight release of a pipeline, read live (fencing must never use a stale copy).
pub async fn in_flight_release(
    conn: impl sqlx::AnyExecutor<'_>,
    pipeline_id: &str,
) -> Result<Option<ReleaseRow>> {
    Ok(sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases
         WHERE pipeline_id = $1 AND status IN ('CANARY_DEPLOYED', 'HEALTH_CHECK')"
    ))
    .bind(pipeline_id)
    .fetch_optional(conn)
    .await?)
}
