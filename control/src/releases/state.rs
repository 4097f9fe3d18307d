//! Reading releases. A row is parsed once, here, into a [`Release`] whose state is the typed
//! [`vf_rules::ReleaseState`]; nothing past this file sees a status string or stage JSON.
//!
//! A row that does not parse (a status this server does not know, stage or plan JSON that
//! does not read) is an [`Unreadable`], never a default: it names the release and the field,
//! is logged at error level, counts in `vectorflow_release_state_unreadable_total{field,reader}`,
//! shows on the rollout view as "release state unreadable", and fencing serves its pipeline's
//! previous version to every node while saying so (see `crate::delivery`).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use vf_rules::{Note, Pause, ReleaseState, ReleaseStatus, RolloutPlan, StageState};

use crate::{Control, ControlError, Result};

/// A release as stored; read it through [`ReleaseRow::parse`].
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
    pub paused: Option<String>,
    pub notes: Option<String>,
}

pub const RELEASE_COLUMNS: &str = "id, pipeline_id, canary_version, previous_version, status, \
    plan, planless, stages, current_stage, bake_deadline, baseline_eps, hold_reason, \
    failure_reason, created_by, updated_by, created_at, updated_at, completed_at, row_version, \
    paused, notes";

/// A release, read and parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    pub id: String,
    pub pipeline_id: String,
    pub canary_version: i64,
    /// The deployed version when the canary was minted; `None` on a first deploy.
    pub previous_version: Option<i64>,
    pub state: ReleaseState,
    /// The pipeline's events per second before the release started, for throughputDrop.
    pub baseline_eps: Option<f64>,
    pub created_by: String,
    pub updated_by: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// The compare-and-set guard of every transition.
    pub row_version: i64,
}

impl Release {
    /// Every node any started stage targeted: the fencing set.
    pub fn targeted(&self) -> BTreeSet<String> {
        self.state.targeted()
    }

    pub fn plan(&self) -> &RolloutPlan {
        &self.state.plan
    }
}

/// A stored release whose state does not parse; `row` keeps what was read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("release {} state is unreadable: stored {field}: {message}", .row.id)]
pub struct Unreadable {
    pub row: Box<ReleaseRow>,
    /// The column: `status`, `plan`, `planless`, `stages`, `current_stage`, `paused` or `notes`.
    pub field: &'static str,
    pub message: String,
}

/// A release as read: parsed, or unreadable with what could be read.
pub type StoredRelease = std::result::Result<Release, Unreadable>;

impl ReleaseRow {
    /// Parses the stored state; the first field that does not read is the error.
    pub fn parse(self) -> StoredRelease {
        let unreadable = |row: &ReleaseRow, field: &'static str, message: String| Unreadable {
            row: Box::new(row.clone()),
            field,
            message,
        };
        let Some(status) = ReleaseStatus::parse(&self.status) else {
            let message = format!("unknown status {:?}", self.status);
            return Err(unreadable(&self, "status", message));
        };
        let plan = match self
            .plan
            .as_deref()
            .map(serde_json::from_str::<RolloutPlan>)
        {
            Some(Ok(plan)) => plan,
            Some(Err(e)) => return Err(unreadable(&self, "plan", e.to_string())),
            None => return Err(unreadable(&self, "plan", "missing".into())),
        };
        let planless = match self.planless {
            0 => false,
            1 => true,
            other => {
                let message = format!("{other} is neither 0 nor 1");
                return Err(unreadable(&self, "planless", message));
            }
        };
        let stages = match serde_json::from_str::<Vec<StageState>>(&self.stages) {
            Ok(stages) if stages.is_empty() => {
                return Err(unreadable(&self, "stages", "no stage started".into()))
            }
            Ok(stages) => stages,
            Err(e) => return Err(unreadable(&self, "stages", e.to_string())),
        };
        let current_stage = match usize::try_from(self.current_stage) {
            Ok(i) if i < stages.len() => i,
            _ => {
                let message = format!(
                    "{} is not one of the {} started stages",
                    self.current_stage,
                    stages.len()
                );
                return Err(unreadable(&self, "current_stage", message));
            }
        };
        let paused = match self.paused.as_deref().map(serde_json::from_str::<Pause>) {
            None => None,
            Some(Ok(pause)) => Some(pause),
            Some(Err(e)) => return Err(unreadable(&self, "paused", e.to_string())),
        };
        let notes = match self.notes.as_deref().map(serde_json::from_str::<Vec<Note>>) {
            None => Vec::new(),
            Some(Ok(notes)) => notes,
            Some(Err(e)) => return Err(unreadable(&self, "notes", e.to_string())),
        };
        Ok(Release {
            state: ReleaseState {
                status,
                planless,
                plan,
                stages,
                current_stage,
                bake_deadline: self.bake_deadline,
                hold_reason: self.hold_reason,
                failure_reason: self.failure_reason,
                completed_at: self.completed_at,
                paused,
                notes,
            },
            id: self.id,
            pipeline_id: self.pipeline_id,
            canary_version: self.canary_version,
            previous_version: self.previous_version,
            baseline_eps: self.baseline_eps,
            created_by: self.created_by,
            updated_by: self.updated_by,
            created_at: self.created_at,
            updated_at: self.updated_at,
            row_version: self.row_version,
        })
    }
}

/// Who read an unreadable release, and so what follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBy {
    /// Delivery fencing: every node of the pipeline is served the previous version.
    Fencing,
    /// The scheduler: the release is not judged and stays in flight, fenced.
    Scheduler,
    /// A page or `release.canary.get`: shown as "release state unreadable".
    View,
    /// An operator's action: refused with a conflict.
    Action,
}

impl ReadBy {
    /// The `reader` label of `vectorflow_release_state_unreadable_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadBy::Fencing => "fencing",
            ReadBy::Scheduler => "scheduler",
            ReadBy::View => "view",
            ReadBy::Action => "action",
        }
    }

    /// What the log line says follows.
    pub fn consequence(self) -> &'static str {
        match self {
            ReadBy::Fencing => "fencing serves every node of the pipeline its previous version",
            ReadBy::Scheduler => "the scheduler cannot judge it; it stays in flight, fenced",
            ReadBy::View => "the rollout view shows it as unreadable",
            ReadBy::Action => "refusing to act on it",
        }
    }
}

/// How often one reader logs one unreadable release: fencing reads it on every config poll.
const REPORT_EVERY: Duration = Duration::from_secs(60);

static LAST_REPORTED: Mutex<Vec<(String, ReadBy, Instant)>> = Mutex::new(Vec::new());

impl Unreadable {
    /// Counts the read in `/metrics` (by field and reader) and logs it at error level with
    /// what follows, once a minute per release and reader.
    pub fn report(&self, ctl: &Control, by: ReadBy) {
        ctl.metrics
            .release_state_unreadable(self.field, by.as_str());
        let now = Instant::now();
        let due = match LAST_REPORTED.lock() {
            Ok(mut last) => {
                last.retain(|(_, _, at)| now.duration_since(*at) < REPORT_EVERY);
                let seen = last
                    .iter()
                    .any(|(id, reader, _)| *id == self.row.id && *reader == by);
                if !seen {
                    last.push((self.row.id.clone(), by, now));
                }
                !seen
            }
            Err(_) => true,
        };
        if due {
            tracing::error!(
                release_id = self.row.id,
                pipeline_id = self.row.pipeline_id,
                field = self.field,
                reader = by.as_str(),
                error = self.message,
                "release state unreadable; {}",
                by.consequence()
            );
        }
    }

    /// What an operator's action on this release answers.
    pub fn refusal(&self) -> ControlError {
        ControlError::Conflict(format!(
            "{self}; the server log has it (search for release {})",
            self.row.id
        ))
    }
}

/// The in-flight release row of a pipeline, read live (fencing must never use a stale copy).
/// Unparsed: an unreadable in-flight release still fences and still blocks a new release.
pub async fn in_flight_row(
    conn: impl sqlx::AnyExecutor<'_>,
    pipeline_id: &str,
) -> Result<Option<ReleaseRow>> {
    let [a, b] = ReleaseStatus::IN_FLIGHT;
    Ok(sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases
         WHERE pipeline_id = $1 AND status IN ($2, $3)"
    ))
    .bind(pipeline_id)
    .bind(a.as_str())
    .bind(b.as_str())
    .fetch_optional(conn)
    .await?)
}

async fn fetch(ctl: &Control, id: &str) -> Result<ReleaseRow> {
    sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&ctl.db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("release {id}")))
}

/// One release by id to show, parsed or not; an unreadable one is reported.
pub async fn load_release(ctl: &Control, id: &str) -> Result<StoredRelease> {
    read_release(ctl, id, ReadBy::View).await
}

/// One release by id, parsed or not; an unreadable one is reported as read by `by`.
pub async fn read_release(ctl: &Control, id: &str, by: ReadBy) -> Result<StoredRelease> {
    Ok(fetch(ctl, id)
        .await?
        .parse()
        .inspect_err(|e| e.report(ctl, by)))
}

/// Who created the release (readable or not): "your own release" rules need only that.
pub async fn release_creator(ctl: &Control, id: &str) -> Result<String> {
    sqlx::query_scalar("SELECT created_by FROM releases WHERE id = $1")
        .bind(id)
        .fetch_optional(&ctl.db.pool)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("release {id}")))
}

/// One release by id to act on; an unreadable one is reported and refused with a conflict.
pub async fn get_release(ctl: &Control, id: &str) -> Result<Release> {
    fetch(ctl, id).await?.parse().map_err(|e| {
        e.report(ctl, ReadBy::Action);
        e.refusal()
    })
}

/// A pipeline's newest release, if any (reported when unreadable).
pub async fn latest_release(ctl: &Control, pipeline_id: &str) -> Result<Option<StoredRelease>> {
    let row = sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases WHERE pipeline_id = $1
         ORDER BY created_at DESC, id DESC LIMIT 1"
    ))
    .bind(pipeline_id)
    .fetch_optional(&ctl.db.pool)
    .await?;
    Ok(row.map(|row| row.parse().inspect_err(|e| e.report(ctl, ReadBy::View))))
}

/// A pipeline's releases, newest first; unreadable ones are reported and kept in the list.
pub async fn list_releases(ctl: &Control, pipeline_id: &str) -> Result<Vec<StoredRelease>> {
    let rows = sqlx::query_as::<_, ReleaseRow>(crate::sql!(
        "SELECT {RELEASE_COLUMNS} FROM releases WHERE pipeline_id = $1 ORDER BY created_at DESC, id DESC"
    ))
    .bind(pipeline_id)
    .fetch_all(&ctl.db.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| row.parse().inspect_err(|e| e.report(ctl, ReadBy::View)))
        .collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> ReleaseRow {
        let plan = json!({"stages": [{"selector": {"percentage": 10}, "bakeSeconds": 60}]});
        let stages =
            json!([{"index": 0, "nodeIds": ["n1"], "startedAt": 1, "bakeDeadline": 60_001}]);
        ReleaseRow {
            id: "r1".into(),
            pipeline_id: "p1".into(),
            canary_version: 2,
            previous_version: Some(1),
            status: "CANARY_DEPLOYED".into(),
            plan: Some(plan.to_string()),
            planless: 0,
            stages: stages.to_string(),
            current_stage: 0,
            bake_deadline: Some(60_001),
            baseline_eps: None,
            hold_reason: None,
            failure_reason: None,
            created_by: "ana".into(),
            updated_by: "ana".into(),
            created_at: 1,
            updated_at: 1,
            completed_at: None,
            row_version: 1,
            paused: None,
            notes: None,
        }
    }

    fn field_of(row: ReleaseRow) -> &'static str {
        row.parse().expect_err("unreadable").field
    }

    #[test]
    fn a_well_formed_row_parses_into_its_typed_state() {
        let release = row().parse().expect("parses");
        assert_eq!(release.state.status, ReleaseStatus::CanaryDeployed);
        assert_eq!(release.targeted(), BTreeSet::from(["n1".to_string()]));
        assert_eq!(release.plan().stages().len(), 1);
    }

    #[test]
    fn every_unreadable_field_is_named_never_defaulted() {
        let mut r = row();
        r.status = "DEPLOYED".into();
        assert_eq!(field_of(r), "status");
        let mut r = row();
        r.stages = "{not json".into();
        assert_eq!(field_of(r), "stages");
        let mut r = row();
        r.stages = "[]".into();
        assert_eq!(field_of(r), "stages");
        let mut r = row();
        r.stages = r.stages.replace("nodeIds", "nodes");
        assert_eq!(field_of(r), "stages");
        let mut r = row();
        r.plan = Some(json!({"stages": []}).to_string());
        assert_eq!(field_of(r), "plan");
        let mut r = row();
        r.plan = None;
        assert_eq!(field_of(r), "plan");
        let mut r = row();
        r.planless = 7;
        assert_eq!(field_of(r), "planless");
        let mut r = row();
        r.current_stage = 1;
        assert_eq!(field_of(r), "current_stage");
        let mut r = row();
        r.paused = Some("{\"at\": \"yesterday\"}".into());
        assert_eq!(field_of(r), "paused");
        let mut r = row();
        r.notes = Some("[1]".into());
        assert_eq!(field_of(r), "notes");
    }

    #[test]
    fn the_error_names_the_release_and_the_field() {
        let mut r = row();
        r.stages = "{not json".into();
        let message = r.parse().expect_err("unreadable").to_string();
        assert!(
            message.starts_with("release r1 state is unreadable: stored stages: "),
            "{message}"
        );
    }
}
