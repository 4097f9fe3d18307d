//! Stopping the line of an environment, and its freeze windows: storing them, and asking
//! [`vf_rules::freeze`] whether a change may happen now.
//!
//! A stopped line is exact at the instant it commits: the scheduler's query skips releases
//! of a stopped environment, and every transition that moves a release forward (advance,
//! complete, resume), every new release and every direct deploy re-reads the line inside
//! its own transaction after locking the environment's row, so a change that races with
//! the stop either commits before it (and is then paused by it) or is refused.

use serde_json::json;
use vf_rules::freeze::{allow, Change, FreezeNow, FreezeWindow, Hold, LineStop};
use vf_rules::{ReleaseStatus, Step};

use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::ids::new_id;
use crate::releases::{operator_reason, read_release, ReadBy, Release};
use crate::{Control, ControlError, Db, Result};

/// A freeze window as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FreezeWindowRow {
    pub id: String,
    pub environment_id: String,
    /// The window's text, as [`FreezeWindow`] writes it.
    pub spec: String,
    pub reason: Option<String>,
    pub created_by: String,
    pub created_at: i64,
}

/// What holds an environment now, with its name for the messages.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvironmentHold {
    pub environment_id: String,
    pub environment: String,
    pub hold: Hold,
}

impl EnvironmentHold {
    /// Refuses `change` with the environment's words unless it may happen now; an admin's
    /// override reason lets it through a freeze (never through a stopped line).
    pub fn allow(&self, change: Change, admin_override: bool) -> Result<()> {
        allow(&self.environment, &self.hold, change, admin_override)
            .map_err(|refusal| ControlError::Conflict(refusal.to_string()))
    }
}

const WINDOW_COLUMNS: &str = "id, environment_id, spec, reason, created_by, created_at";

pub async fn list_freeze_windows(db: &Db, environment_id: &str) -> Result<Vec<FreezeWindowRow>> {
    Ok(sqlx::query_as::<_, FreezeWindowRow>(crate::sql!(
        "SELECT {WINDOW_COLUMNS} FROM freeze_windows WHERE environment_id = $1
         ORDER BY created_at, id"
    ))
    .bind(environment_id)
    .fetch_all(&db.pool)
    .await?)
}

/// Adds a freeze window (`window` as in "Fri 16:00 - Mon 08:00 Europe/Berlin"); `reason`
/// (optional, at most 500 characters) shows in the banner and the refusals.
pub async fn create_freeze_window(
    db: &Db,
    actor: &Actor,
    environment_id: &str,
    window: &str,
    reason: Option<String>,
    now: i64,
) -> Result<FreezeWindowRow> {
    let parsed = FreezeWindow::parse(window).map_err(|e| ControlError::invalid("window", e))?;
    let reason = operator_reason(reason)?;
    crate::fleet::get_environment(db, environment_id).await?;
    let row = FreezeWindowRow {
        id: new_id(),
        environment_id: environment_id.to_owned(),
        spec: parsed.to_string(),
        reason,
        created_by: actor.name.clone(),
        created_at: now,
    };
    let mut tx = audit::begin(db).await?;
    sqlx::query(
        "INSERT INTO freeze_windows (id, environment_id, spec, reason, created_by, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&row.id)
    .bind(&row.environment_id)
    .bind(&row.spec)
    .bind(&row.reason)
    .bind(&row.created_by)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::FreezeWindowCreate,
            target_id: &row.id,
            environment_id: Some(environment_id),
            details: json!({ "window": row.spec, "reason": row.reason }),
        },
    )
    .await?;
    Ok(row)
}

/// The environment a freeze window belongs to (for the caller's access check).
pub async fn freeze_window_environment(db: &Db, id: &str) -> Result<String> {
    sqlx::query_scalar::<_, String>("SELECT environment_id FROM freeze_windows WHERE id = $1")
        .bind(id)
        .fetch_optional(&db.pool)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("freeze window {id}")))
}

pub async fn delete_freeze_window(db: &Db, actor: &Actor, id: &str, now: i64) -> Result<()> {
    let row = sqlx::query_as::<_, FreezeWindowRow>(crate::sql!(
        "SELECT {WINDOW_COLUMNS} FROM freeze_windows WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("freeze window {id}")))?;
    let mut tx = audit::begin(db).await?;
    let done = sqlx::query("DELETE FROM freeze_windows WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() != 1 {
        return Err(ControlError::NotFound(format!("freeze window {id}")));
    }
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::FreezeWindowDelete,
            target_id: id,
            environment_id: Some(&row.environment_id),
            details: json!({ "window": row.spec, "reason": row.reason }),
        },
    )
    .await
}

/// What holds the environment at `now`.
pub async fn hold_of(db: &Db, environment_id: &str, now: i64) -> Result<EnvironmentHold> {
    let mut conn = db.pool.acquire().await?;
    hold_in(&mut conn, environment_id, now, false).await
}

/// What holds the environment of `pipeline_id` at `now`.
pub async fn hold_of_pipeline(db: &Db, pipeline_id: &str, now: i64) -> Result<EnvironmentHold> {
    let environment_id: String =
        sqlx::query_scalar("SELECT environment_id FROM pipelines WHERE id = $1")
            .bind(pipeline_id)
            .fetch_optional(&db.pool)
            .await?
            .ok_or_else(|| ControlError::NotFound(format!("pipeline {pipeline_id}")))?;
    hold_of(db, &environment_id, now).await
}

/// Reads what holds the environment on `conn`. With `lock`, inside a transaction, the
/// environment's row is locked first (a no-op update), so a stop of the line that commits
/// after this read waits for the caller's transaction to end.
pub async fn hold_in(
    conn: &mut sqlx::AnyConnection,
    environment_id: &str,
    now: i64,
    lock: bool,
) -> Result<EnvironmentHold> {
    let sql = if lock {
        "UPDATE environments SET line_stopped = line_stopped WHERE id = $1
         RETURNING name, line_stopped"
    } else {
        "SELECT name, line_stopped FROM environments WHERE id = $1"
    };
    let (environment, line): (String, Option<String>) = sqlx::query_as(sql)
        .bind(environment_id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("environment {environment_id}")))?;
    let line = line.map(|text| read_line(&text, environment_id));
    let rows = sqlx::query_as::<_, FreezeWindowRow>(crate::sql!(
        "SELECT {WINDOW_COLUMNS} FROM freeze_windows WHERE environment_id = $1"
    ))
    .bind(environment_id)
    .fetch_all(&mut *conn)
    .await?;
    let windows: Vec<(FreezeWindow, Option<String>)> = (rows.into_iter())
        .filter_map(|row| match FreezeWindow::parse(&row.spec) {
            Ok(window) => Some((window, row.reason)),
            Err(e) => {
                tracing::error!(
                    freeze_window = row.id,
                    spec = row.spec,
                    error = e,
                    "a stored freeze window does not read; it is ignored"
                );
                None
            }
        })
        .collect();
    Ok(EnvironmentHold {
        environment_id: environment_id.to_owned(),
        environment,
        hold: Hold {
            line,
            freeze: FreezeNow::at(&windows, now),
        },
    })
}

/// A stored line stop that does not read still stops the line.
fn read_line(text: &str, environment_id: &str) -> LineStop {
    serde_json::from_str(text).unwrap_or_else(|e| {
        tracing::error!(
            environment_id,
            error = %e,
            "the stored line stop does not read; the line stays stopped"
        );
        LineStop {
            at: 0,
            by: "unknown".into(),
            reason: None,
        }
    })
}

/// Refuses `change` unless the environment allows it, read inside the caller's transaction
/// with the environment's row locked.
pub async fn refuse_in(
    conn: &mut sqlx::AnyConnection,
    environment_id: &str,
    change: Change,
    admin_override: bool,
    now: i64,
) -> Result<()> {
    hold_in(conn, environment_id, now, true)
        .await?
        .allow(change, admin_override)
}

/// An admin's override of a freeze: a reason as [`operator_reason`] reads it, and required;
/// kept in the audit event.
pub fn freeze_override(reason: Option<&str>) -> Result<String> {
    operator_reason(reason.map(str::to_owned))?
        .ok_or_else(|| ControlError::invalid("reason", "overriding a freeze needs a reason"))
}

/// What stopping or lifting the line did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineChange {
    /// The releases paused (stop) or resumed (lift).
    pub releases: Vec<String>,
}

/// Stops the line of an environment: new releases and direct deploys are refused from the
/// commit on, and every in-flight release there pauses (marked as paused by the stop, so
/// lifting the line resumes exactly those).
pub async fn stop_line(
    ctl: &Control,
    actor: &Actor,
    environment_id: &str,
    reason: Option<String>,
) -> Result<LineChange> {
    let reason = operator_reason(reason)?;
    let now = ctl.now();
    let stop = LineStop {
        at: now,
        by: actor.name.clone(),
        reason: reason.clone(),
    };
    let mut tx = audit::begin(&ctl.db).await?;
    let held = hold_in(&mut tx, environment_id, now, true).await?;
    if let Some(line) = &held.hold.line {
        return Err(ControlError::Conflict(format!(
            "the line of {} is already stopped by {}",
            held.environment, line.by
        )));
    }
    sqlx::query("UPDATE environments SET line_stopped = $1 WHERE id = $2")
        .bind(serde_json::to_string(&stop)?)
        .bind(environment_id)
        .execute(&mut *tx)
        .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::EnvironmentLineStop,
            target_id: environment_id,
            environment_id: Some(environment_id),
            details: json!({ "environment": held.environment, "operatorReason": reason }),
        },
    )
    .await?;
    let said = match &reason {
        Some(reason) => format!("line stopped: {reason}"),
        None => "line stopped".to_owned(),
    };
    let pause = Step::Pause {
        by: actor.name.clone(),
        reason: Some(said),
        line_stop: true,
    };
    let releases = in_flight(ctl, environment_id).await?;
    let releases = each(ctl, actor, releases, pause, |r| r.state.paused.is_none()).await;
    Ok(LineChange { releases })
}

/// Lifts a stopped line: changes are allowed again and the releases the stop paused resume
/// with the bake time they had left. Releases an operator paused stay paused.
pub async fn lift_line(
    ctl: &Control,
    actor: &Actor,
    environment_id: &str,
    reason: Option<String>,
) -> Result<LineChange> {
    let reason = operator_reason(reason)?;
    let now = ctl.now();
    let mut tx = audit::begin(&ctl.db).await?;
    let held = hold_in(&mut tx, environment_id, now, true).await?;
    let Some(line) = &held.hold.line else {
        return Err(ControlError::Conflict(format!(
            "the line of {} is not stopped",
            held.environment
        )));
    };
    sqlx::query("UPDATE environments SET line_stopped = NULL WHERE id = $1")
        .bind(environment_id)
        .execute(&mut *tx)
        .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::EnvironmentLineLift,
            target_id: environment_id,
            environment_id: Some(environment_id),
            details: json!({
                "environment": held.environment,
                "stoppedBy": line.by,
                "stoppedAt": line.at,
                "operatorReason": reason,
            }),
        },
    )
    .await?;
    let by_stop = |r: &Release| r.state.paused.as_ref().is_some_and(|p| p.line_stop);
    let releases = in_flight(ctl, environment_id).await?;
    let resume = Step::Resume {
        by: actor.name.clone(),
    };
    let releases = each(ctl, actor, releases, resume, by_stop).await;
    Ok(LineChange { releases })
}

/// The in-flight releases of the environment.
async fn in_flight(ctl: &Control, environment_id: &str) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT r.id FROM releases r JOIN pipelines p ON p.id = r.pipeline_id
         WHERE p.environment_id = $1 AND r.status IN ($2, $3) ORDER BY r.id",
    )
    .bind(environment_id)
    .bind(ReleaseStatus::IN_FLIGHT[0].as_str())
    .bind(ReleaseStatus::IN_FLIGHT[1].as_str())
    .fetch_all(&ctl.db.pool)
    .await?)
}

/// Applies `step` to each readable release that `still` holds for, re-reading and retrying
/// when a scheduler tick or an operator changed it first. Returns the releases changed; one
/// that could not be changed is logged and left (its operator sees it unpaused, or paused).
async fn each(
    ctl: &Control,
    actor: &Actor,
    ids: Vec<String>,
    step: Step,
    still: impl Fn(&Release) -> bool,
) -> Vec<String> {
    let mut changed = Vec::new();
    for id in ids {
        for attempt in 0..5 {
            let release = match read_release(ctl, &id, ReadBy::Action).await {
                Ok(Ok(release)) if release.state.in_flight() && still(&release) => release,
                _ => break,
            };
            let applied = crate::releases::apply_step(ctl, &release, step.clone(), actor).await;
            match applied {
                Ok(_) => {
                    changed.push(id.clone());
                    break;
                }
                Err(ControlError::Conflict(_)) if attempt < 4 => continue,
                Err(e) => {
                    tracing::error!(
                        release_id = id,
                        error = e.chain(),
                        "could not pause or resume a release for the environment's line"
                    );
                    break;
                }
            }
        }
    }
    changed
}

/// What [`announce_freezes`] stores of the freeze it announced.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Announced {
    window: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    until: i64,
}

/// Writes one audit entry (and so one webhook event) when an environment's freeze starts or
/// ends: each environment's open freeze at `now` is compared with the one last announced,
/// and the change is stored by compare-and-set in the same transaction as its entry, so of
/// several replicas' schedulers exactly one announces it. Returns the entries written.
pub async fn announce_freezes(ctl: &Control, now: i64) -> Result<usize> {
    let environments: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT id, freeze_announced FROM environments
         WHERE freeze_announced IS NOT NULL
            OR id IN (SELECT environment_id FROM freeze_windows)",
    )
    .fetch_all(&ctl.db.pool)
    .await?;
    let mut written = 0;
    for (environment_id, announced) in environments {
        let open = hold_of(&ctl.db, &environment_id, now).await?.hold.freeze;
        let (action, next) = match (&announced, open) {
            (None, Some(f)) => (
                AuditAction::EnvironmentFreezeStart,
                Some(Announced {
                    window: f.window,
                    reason: f.reason,
                    until: f.until,
                }),
            ),
            (Some(_), None) => (AuditAction::EnvironmentFreezeEnd, None),
            _ => continue,
        };
        let mut tx = audit::begin(&ctl.db).await?;
        let next_text = next.as_ref().map(serde_json::to_string).transpose()?;
        let done = match &announced {
            None => sqlx::query(
                "UPDATE environments SET freeze_announced = $1
                 WHERE id = $2 AND freeze_announced IS NULL",
            )
            .bind(&next_text)
            .bind(&environment_id),
            Some(previous) => sqlx::query(
                "UPDATE environments SET freeze_announced = $1
                 WHERE id = $2 AND freeze_announced = $3",
            )
            .bind(&next_text)
            .bind(&environment_id)
            .bind(previous),
        }
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            continue; // another replica announced it
        }
        let details = match (&next, &announced) {
            (Some(n), _) => json!({ "window": n.window, "reason": n.reason, "until": n.until }),
            (None, Some(previous)) => serde_json::from_str(previous).unwrap_or_else(|_| json!({})),
            (None, None) => json!({}),
        };
        tx.commit(
            now,
            AuditEntry {
                actor: &Actor::system("scheduler"),
                action,
                target_id: &environment_id,
                environment_id: Some(&environment_id),
                details,
            },
        )
        .await?;
        tracing::info!(environment_id, action = action.as_str(), "freeze announced");
        written += 1;
    }
    Ok(written)
}
