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

/// What is recorded when a stage starts, and every evaluation of its gates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageState {
    pub index: i64,
    /// The node ids this stage added, materialised when it started.
    pub node_ids: Vec<String>,
    pub started_at: i64,
    pub bake_deadline: i64,
    /// The pipeline's events already counted in the minute the stage started, before it
    /// started: subtracted from the bake's throughput so earlier traffic never counts.
    #[serde(default)]
    pub start_minute_events: i64,
    #[serde(default)]
    pub evaluations: Vec<GateEvaluation>,
    /// `passed`, `failed`, `held` once the stage is decided; absent while it bakes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

/// One evaluation of a stage's gates, with its evidence and what it led to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateEvaluation {
    pub at: i64,
    /// `scheduler`, or the operator action that asked (`advance`, `complete`, `broaden`).
    pub trigger: String,
    pub actor: String,
    pub results: Vec<vf_rules::GateResult>,
    /// What followed: `advance`, `complete`, `hold`, `rollback`, or `refused`.
    pub decision: String,
}

impl ReleaseRow {
    pub fn stage_states(&self) -> Vec<StageState> {
        serde_json::from_str(&self.stages).unwrap_or_default()
    }

    pub fn in_flight(&self) -> bool {
        matches!(self.status.as_str(), "CANARY_DEPLOYED" | "HEALTH_CHECK")
    }

    /// The stored status; an unknown spelling (a newer server's) reads as not in flight.
    pub fn status(&self) -> vf_rules::ReleaseStatus {
        vf_rules::ReleaseStatus::parse(&self.status).unwrap_or(vf_rules::ReleaseStatus::RolledBack)
    }

    /// The stored plan, parsed again (it was valid when stored).
    pub fn plan(&self) -> crate::Result<vf_rules::RolloutPlan> {
        let text = self.plan.as_deref().unwrap_or("null");
        let value: serde_json::Value = serde_json::from_str(text)?;
        vf_rules::RolloutPlan::parse(&value)
            .map_err(|e| crate::ControlError::Internal(anyhow::anyhow!("stored plan: {e}")))
    }

    pub fn is_planless(&self) -> bool {
        self.planless != 0
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

/// One release by id.
pub async fn get_release(db: &crate::Db, id: &str) -> Result<ReleaseRow> {
    sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| crate::ControlError::NotFound(format!("release {id}")))
}

/// A pipeline's releases, newest first.
pub async fn list_releases(db: &crate::Db, pipeline_id: &str) -> Result<Vec<ReleaseRow>> {
    Ok(sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases WHERE pipeline_id = $1 ORDER BY created_at DESC, id DESC"
    ))
    .bind(pipeline_id)
    .fetch_all(&db.pool)
    .await?)
}

/// `(pipeline name, status)` of each pipeline's latest release, for `/metrics`.
pub async fn latest_statuses(db: &crate::Db) -> Result<Vec<(String, String)>> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT p.id, p.name, r.status FROM releases r JOIN pipelines p ON p.id = r.pipeline_id
         ORDER BY r.created_at, r.id",
    )
    .fetch_all(&db.pool)
    .await?;
    let mut latest = std::collections::BTreeMap::new();
    for (id, name, status) in rows {
        latest.insert(id, (name, status));
    }
    Ok(latest.into_values().collect())
}
