//! Heartbeats: per-pipeline status and cumulative counters become NodePipelineStatus rows,
//! per-minute deltas per node and pipeline, and per-minute pipeline aggregates.

use std::collections::HashSet;

use vf_protocol::{Heartbeat, PipelineReport};

use crate::fleet::{parse_labels, NodeRow, PipelineStatusRow, STATUS_COLUMNS};
use crate::{ControlError, Db, Result};

/// Longest process status kept; longer values are cut, never refused.
const MAX_STATUS_LEN: usize = 64;
const MAX_REPORTS: usize = 500;
/// The most one report may add to a counter: one trillion (about 16 billion events a second
/// over a minute). A larger delta is a broken or hostile agent, not traffic: it is taken as
/// this much, logged and counted (`vectorflow_counter_deltas_clamped_total`), so a single
/// report can neither overflow a sum nor drown every other node's errors in a rate.
pub const MAX_DELTA_PER_REPORT: i64 = 1_000_000_000_000;

/// The counters of one report, checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub events_in: i64,
    pub events_out: i64,
    pub errors: i64,
    pub discarded: i64,
    pub bytes_in: i64,
    pub bytes_out: i64,
}

impl Counters {
    fn from_report(i: usize, r: &PipelineReport) -> Result<Counters> {
        let get = |name: &str, v: Option<i64>| -> Result<i64> {
            match v {
                Some(n) if n < 0 => Err(ControlError::invalid(
                    format!("pipelines[{i}].{name}"),
                    "counters are cumulative and cannot be negative",
                )),
                v => Ok(v.unwrap_or(0)),
            }
        };
        Ok(Counters {
            events_in: get("eventsIn", r.events_in)?,
            events_out: get("eventsOut", r.events_out)?,
            errors: get("errorsTotal", r.errors_total)?,
            discarded: get("eventsDiscarded", r.events_discarded)?,
            bytes_in: get("bytesIn", r.bytes_in)?,
            bytes_out: get("bytesOut", r.bytes_out)?,
        })
    }

    fn of_status(s: &PipelineStatusRow) -> Counters {
        Counters {
            events_in: s.events_in,
            events_out: s.events_out,
            errors: s.errors_total,
            discarded: s.events_discarded,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
        }
    }

    /// What happened since `previous`. A counter that went down means the process restarted,
    /// so its new value is the delta.
    pub fn delta_since(self, previous: Option<Counters>) -> Counters {
        let Some(p) = previous else { return self };
        let d = |now: i64, before: i64| if now >= before { now - before } else { now };
        Counters {
            events_in: d(self.events_in, p.events_in),
            events_out: d(self.events_out, p.events_out),
            errors: d(self.errors, p.errors),
            discarded: d(self.discarded, p.discarded),
            bytes_in: d(self.bytes_in, p.bytes_in),
            bytes_out: d(self.bytes_out, p.bytes_out),
        }
    }

    /// Each delta capped at [`MAX_DELTA_PER_REPORT`], and how many counters were capped.
    pub fn clamped(self) -> (Counters, usize) {
        let mut capped = 0;
        let mut cap = |v: i64| {
            if v > MAX_DELTA_PER_REPORT {
                capped += 1;
                MAX_DELTA_PER_REPORT
            } else {
                v
            }
        };
        let c = Counters {
            events_in: cap(self.events_in),
            events_out: cap(self.events_out),
            errors: cap(self.errors),
            discarded: cap(self.discarded),
            bytes_in: cap(self.bytes_in),
            bytes_out: cap(self.bytes_out),
        };
        (c, capped)
    }
}

/// The sum of counter values, saturating at `i64::MAX` instead of overflowing: stored rows
/// may hold anything up to `i64::MAX`, and a database `SUM` over them would fail.
pub fn saturating_total(values: impl IntoIterator<Item = i64>) -> i64 {
    values
        .into_iter()
        .fold(0i64, |total, v| total.saturating_add(v.max(0)))
}

/// The start of the minute `now` falls in.
pub fn minute_of(now: i64) -> i64 {
    now - now.rem_euclid(60_000)
}

/// The `SET` clauses adding a report's deltas to a per-minute row of `table`, saturating at
/// `i64::MAX`: a node reporting absurd counters must neither fail its own polls (PostgreSQL
/// refuses the overflow) nor leave a row SQLite has turned into a float.
fn add_deltas(table: &str) -> String {
    let max = i64::MAX;
    [
        "events_in",
        "events_out",
        "errors",
        "events_discarded",
        "bytes_in",
        "bytes_out",
    ]
    .iter()
    .map(|c| {
        format!(
            "{c} = CASE WHEN {table}.{c} > {max} - excluded.{c} THEN {max} \
             ELSE {table}.{c} + excluded.{c} END"
        )
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// Free text as PostgreSQL can store it: without NUL characters (SQLite would keep them).
fn storable(s: &str) -> String {
    s.replace('\0', "")
}

fn cut_status(s: &str) -> String {
    let s = storable(s);
    let s = s.trim();
    if s.len() <= MAX_STATUS_LEN {
        return s.to_string();
    }
    let mut end = MAX_STATUS_LEN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Records a heartbeat: node facts, then each report for a pipeline of the node's
/// environment (reports for unknown pipelines are ignored), all in one transaction. Returns
/// how many counter deltas were capped at [`MAX_DELTA_PER_REPORT`].
pub async fn record_heartbeat(db: &Db, node: &NodeRow, hb: Heartbeat, now: i64) -> Result<usize> {
    if hb.pipelines.len() > MAX_REPORTS {
        return Err(ControlError::invalid(
            "pipelines",
            format!("at most {MAX_REPORTS} reports"),
        ));
    }
    let labels = match hb.labels {
        Some(l) => Some(serde_json::to_string(&parse_labels("labels", l)?)?),
        None => None,
    };
    let agent_version = crate::agent::optional_text("agentVersion", hb.agent_version, 100)?;
    let vector_version = crate::agent::optional_text("vectorVersion", hb.vector_version, 100)?;
    let mut checked = Vec::with_capacity(hb.pipelines.len());
    for (i, r) in hb.pipelines.iter().enumerate() {
        checked.push((r, Counters::from_report(i, r)?));
    }
    let known: HashSet<String> =
        sqlx::query_scalar::<_, String>("SELECT id FROM pipelines WHERE environment_id = $1")
            .bind(&node.environment_id)
            .fetch_all(&db.read)
            .await?
            .into_iter()
            .collect();
    let host_metrics = hb.host_metrics.map(|v| v.to_string());
    let minute = minute_of(now);

    // Most heartbeats repeat the node's facts: then only the time changes, and that is
    // kept in memory like a poll's (`LastSeen`) instead of written here.
    let changes = |new: &Option<String>, old: &Option<String>| new.is_some() && new != old;
    let facts_changed = changes(&agent_version, &node.agent_version)
        || changes(&vector_version, &node.vector_version)
        || changes(&labels, &Some(node.reported_labels.clone()))
        || host_metrics.is_some();
    let mut capped_total = 0;
    let mut tx = db.pool.begin().await?;
    if facts_changed {
        sqlx::query(
            "UPDATE nodes SET last_seen_at = $1,
                agent_version = COALESCE($2, agent_version),
                vector_version = COALESCE($3, vector_version),
                reported_labels = COALESCE($4, reported_labels),
                host_metrics = COALESCE($5, host_metrics)
             WHERE id = $6",
        )
        .bind(now)
        .bind(agent_version)
        .bind(vector_version)
        .bind(labels)
        .bind(host_metrics)
        .bind(&node.id)
        .execute(&mut *tx)
        .await?;
    } else {
        db.last_seen.record(&node.id, now);
    }

    for (report, counters) in checked {
        if !known.contains(&report.pipeline_id) {
            continue;
        }
        let previous = sqlx::query_as::<_, PipelineStatusRow>(crate::sql!(
            "SELECT {STATUS_COLUMNS} FROM node_pipeline_status WHERE node_id = $1 AND pipeline_id = $2"
        ))
        .bind(&node.id)
        .bind(&report.pipeline_id)
        .fetch_optional(&mut *tx)
        .await?;
        // A different version (or pid) means a new process whose counters started from zero,
        // even when they happen to have grown past the old ones.
        let same_process = |p: &&PipelineStatusRow| {
            p.version == Some(report.version) && (report.pid.is_none() || p.pid == report.pid)
        };
        let (delta, capped) = counters
            .delta_since(
                previous
                    .as_ref()
                    .filter(same_process)
                    .map(Counters::of_status),
            )
            .clamped();
        if capped > 0 {
            tracing::warn!(
                node_id = node.id,
                pipeline_id = report.pipeline_id,
                capped,
                "absurd counter delta capped at {MAX_DELTA_PER_REPORT}"
            );
            capped_total += capped;
        }
        let logs = report
            .recent_logs
            .as_ref()
            .map(|l| {
                let last: Vec<String> = l
                    .iter()
                    .rev()
                    .take(20)
                    .rev()
                    .map(|line| storable(line))
                    .collect();
                serde_json::to_string(&last)
            })
            .transpose()?;
        sqlx::query(
            "INSERT INTO node_pipeline_status (node_id, pipeline_id, version, status, events_in,
                events_out, errors_total, events_discarded, bytes_in, bytes_out, uptime_seconds,
                pid, config_checksum, recent_logs, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
             ON CONFLICT (node_id, pipeline_id) DO UPDATE SET version = excluded.version,
                status = excluded.status, events_in = excluded.events_in,
                events_out = excluded.events_out, errors_total = excluded.errors_total,
                events_discarded = excluded.events_discarded, bytes_in = excluded.bytes_in,
                bytes_out = excluded.bytes_out, uptime_seconds = excluded.uptime_seconds,
                pid = excluded.pid, config_checksum = excluded.config_checksum,
                recent_logs = excluded.recent_logs, updated_at = excluded.updated_at",
        )
        .bind(&node.id)
        .bind(&report.pipeline_id)
        .bind(report.version)
        .bind(cut_status(&report.status))
        .bind(counters.events_in)
        .bind(counters.events_out)
        .bind(counters.errors)
        .bind(counters.discarded)
        .bind(counters.bytes_in)
        .bind(counters.bytes_out)
        .bind(report.uptime_seconds)
        .bind(report.pid)
        .bind(report.config_checksum.as_deref().map(storable))
        .bind(logs)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if delta == Counters::default() {
            continue;
        }
        sqlx::query(crate::sql!(
            "INSERT INTO node_pipeline_metrics (node_id, pipeline_id, version, minute, events_in,
                events_out, errors, events_discarded, bytes_in, bytes_out)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (node_id, pipeline_id, version, minute) DO UPDATE SET {}",
            add_deltas("node_pipeline_metrics")
        ))
        .bind(&node.id)
        .bind(&report.pipeline_id)
        .bind(report.version)
        .bind(minute)
        .bind(delta.events_in)
        .bind(delta.events_out)
        .bind(delta.errors)
        .bind(delta.discarded)
        .bind(delta.bytes_in)
        .bind(delta.bytes_out)
        .execute(&mut *tx)
        .await?;
        sqlx::query(crate::sql!(
            "INSERT INTO pipeline_metrics (pipeline_id, minute, events_in, events_out, errors,
                events_discarded, bytes_in, bytes_out)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (pipeline_id, minute) DO UPDATE SET {}",
            add_deltas("pipeline_metrics")
        ))
        .bind(&report.pipeline_id)
        .bind(minute)
        .bind(delta.events_in)
        .bind(delta.events_out)
        .bind(delta.errors)
        .bind(delta.discarded)
        .bind(delta.bytes_in)
        .bind(delta.bytes_out)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(capped_total)
}

/// Marks the node as seen (a poll without a heartbeat body): in memory, written by the next
/// flush ([`crate::fleet::LastSeen`]), so a poll is not a database write.
pub fn touch(db: &Db, node: &NodeRow, now: i64) {
    db.last_seen.record(&node.id, now);
}

/// One per-minute aggregate row of a pipeline.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct MinuteRow {
    pub minute: i64,
    pub events_in: i64,
    pub events_out: i64,
    pub errors: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(events_in: i64) -> Counters {
        Counters {
            events_in,
            ..Counters::default()
        }
    }

    #[test]
    fn a_growing_counter_yields_the_difference() {
        assert_eq!(c(150).delta_since(Some(c(100))), c(50));
    }

    #[test]
    fn a_counter_that_went_down_means_a_restart_and_counts_whole() {
        assert_eq!(c(30).delta_since(Some(c(100))), c(30));
    }

    #[test]
    fn the_first_report_counts_whole() {
        assert_eq!(c(42).delta_since(None), c(42));
    }

    #[test]
    fn a_delta_over_a_trillion_is_capped_and_counted() {
        let (c, capped) = Counters {
            events_in: i64::MAX,
            errors: MAX_DELTA_PER_REPORT,
            bytes_out: MAX_DELTA_PER_REPORT + 1,
            ..Counters::default()
        }
        .clamped();
        assert_eq!(c.events_in, MAX_DELTA_PER_REPORT);
        assert_eq!(c.errors, MAX_DELTA_PER_REPORT);
        assert_eq!(c.bytes_out, MAX_DELTA_PER_REPORT);
        assert_eq!(capped, 2);
    }

    #[test]
    fn totals_saturate_instead_of_overflowing() {
        assert_eq!(saturating_total([i64::MAX, i64::MAX, 5]), i64::MAX);
        assert_eq!(saturating_total([2, 3]), 5);
        assert_eq!(saturating_total([]), 0);
    }

    #[test]
    fn minutes_are_floored_to_the_minute() {
        assert_eq!(minute_of(125_000), 120_000);
    }

    #[test]
    fn nul_characters_are_dropped_from_a_status_rather_than_refused() {
        assert_eq!(cut_status("RUN\0NING"), "RUNNING");
    }

    #[test]
    fn an_overlong_status_is_cut_not_refused() {
        let long = "X".repeat(100);
        assert_eq!(cut_status(&long).len(), MAX_STATUS_LEN);
        assert_eq!(cut_status("WARMING_UP"), "WARMING_UP");
    }
}
