//! What agents send besides heartbeats: log lines, answers to sample requests and the
//! events of live taps. Each is kept bounded in the database, so every replica shows the
//! same, a chatty agent cannot fill the disk, and old entries go first.
//!
//! Sampled and tapped events are customer data: they are stored for the node page and never
//! written to the server's log.

use vf_protocol::{PipelineLogs, SampleResult, TapEvents};

use crate::heartbeat::{cut_bytes, storable, RECENT_LOG_LINES};
use crate::{ControlError, Db, Result};

/// The newest lines kept per node and pipeline.
pub const MAX_LOG_LINES: i64 = 1_000;
/// A longer line is cut to this many bytes (at a character boundary).
pub const MAX_LINE_BYTES: usize = 4 * 1024;
/// The newest events kept per tap.
pub const MAX_TAP_EVENTS: i64 = 500;
/// At most this many events are kept of one component's sample.
pub const MAX_SAMPLE_EVENTS: usize = 100;

/// `line` without NULs (neither database stores them in text) and cut to [`MAX_LINE_BYTES`].
pub fn storable_line(line: &str) -> String {
    cut_bytes(&storable(line), MAX_LINE_BYTES).to_owned()
}

/// An identifier an agent sends back (pipeline, request, component): present, and free of
/// NUL characters, which no id of ours has and PostgreSQL cannot store.
fn required(field: String, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(ControlError::invalid(field, "must not be empty"));
    }
    if value.contains('\0') {
        return Err(ControlError::invalid(
            field,
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

/// Appends each pipeline's lines for `node_id` and drops all but the newest
/// [`MAX_LOG_LINES`] per pipeline. Returns how many lines were kept.
pub async fn append_logs(
    db: &Db,
    node_id: &str,
    batches: &[PipelineLogs],
    now: i64,
) -> Result<usize> {
    for (i, b) in batches.iter().enumerate() {
        required(format!("[{i}].pipelineId"), &b.pipeline_id)?;
    }
    let mut tx = db.pool.begin().await?;
    let mut kept = 0;
    for b in batches.iter().filter(|b| !b.lines.is_empty()) {
        // Only the newest lines can survive the trim: skip writing the rest.
        let skip = b.lines.len().saturating_sub(MAX_LOG_LINES as usize);
        for line in &b.lines[skip..] {
            sqlx::query(
                "INSERT INTO node_logs (node_id, pipeline_id, at, line) VALUES ($1, $2, $3, $4)",
            )
            .bind(node_id)
            .bind(&b.pipeline_id)
            .bind(now)
            .bind(storable_line(line))
            .execute(&mut *tx)
            .await?;
            kept += 1;
        }
        sqlx::query(
            "DELETE FROM node_logs WHERE node_id = $1 AND pipeline_id = $2 AND id <= (
                SELECT id FROM node_logs WHERE node_id = $1 AND pipeline_id = $2
                ORDER BY id DESC LIMIT 1 OFFSET $3)",
        )
        .bind(node_id)
        .bind(&b.pipeline_id)
        .bind(MAX_LOG_LINES)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(kept)
}

/// The lines heartbeats carry as `recentLogs` (the last [`RECENT_LOG_LINES`] per pipeline, as
/// the heartbeat keeps them), added to
/// the store unless they are what it already ends with: an agent repeats a crashed
/// process's last lines in every heartbeat until it runs again.
pub async fn append_reported_logs(
    db: &Db,
    node_id: &str,
    reports: &[PipelineLogs],
    now: i64,
) -> Result<()> {
    // A report of a pipeline id no pipeline can have is ignored, like any unknown pipeline.
    for report in reports.iter().filter(|r| !r.pipeline_id.contains('\0')) {
        let lines: Vec<String> = report
            .lines
            .iter()
            .rev()
            .take(RECENT_LOG_LINES)
            .rev()
            .map(|l| storable_line(l))
            .collect();
        if lines.is_empty() {
            continue;
        }
        let tail = recent_logs(db, node_id, Some(&report.pipeline_id), lines.len() as i64).await?;
        if tail.iter().map(|l| &l.line).eq(lines.iter()) {
            continue;
        }
        let batch = PipelineLogs {
            pipeline_id: report.pipeline_id.clone(),
            lines,
        };
        append_logs(db, node_id, &[batch], now).await?;
    }
    Ok(())
}

/// One stored log line.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LogLine {
    pub pipeline_id: String,
    pub at: i64,
    pub line: String,
}

/// The newest `limit` lines of `node_id` (of one pipeline, or all), oldest first.
pub async fn recent_logs(
    db: &Db,
    node_id: &str,
    pipeline_id: Option<&str>,
    limit: i64,
) -> Result<Vec<LogLine>> {
    let mut lines: Vec<LogLine> = match pipeline_id {
        Some(pipeline_id) => {
            sqlx::query_as(
                "SELECT pipeline_id, at, line FROM node_logs
                 WHERE node_id = $1 AND pipeline_id = $2 ORDER BY id DESC LIMIT $3",
            )
            .bind(node_id)
            .bind(pipeline_id)
            .bind(limit)
            .fetch_all(&db.read)
            .await?
        }
        None => {
            sqlx::query_as(
                "SELECT pipeline_id, at, line FROM node_logs
                 WHERE node_id = $1 ORDER BY id DESC LIMIT $2",
            )
            .bind(node_id)
            .bind(limit)
            .fetch_all(&db.read)
            .await?
        }
    };
    lines.reverse();
    Ok(lines)
}

/// The newest `per_node` lines of one pipeline on each of `node_ids`, per node oldest first,
/// in one statement.
pub async fn recent_logs_of(
    db: &Db,
    pipeline_id: &str,
    node_ids: &[String],
    per_node: i64,
) -> Result<Vec<(String, LogLine)>> {
    if node_ids.is_empty() {
        return Ok(Vec::new());
    }
    let placeholders = (0..node_ids.len())
        .map(|i| format!("${}", i + 3))
        .collect::<Vec<_>>()
        .join(", ");
    let statement = format!(
        "SELECT node_id, pipeline_id, at, line FROM (
            SELECT node_id, pipeline_id, at, line, id,
                ROW_NUMBER() OVER (PARTITION BY node_id ORDER BY id DESC) AS newest
            FROM node_logs WHERE pipeline_id = $1 AND node_id IN ({placeholders})
         ) kept WHERE newest <= $2 ORDER BY node_id, id"
    );
    let mut query =
        sqlx::query_as::<_, (String, String, i64, String)>(sqlx::AssertSqlSafe(statement))
            .bind(pipeline_id)
            .bind(per_node);
    for id in node_ids {
        query = query.bind(id);
    }
    Ok(query
        .fetch_all(&db.read)
        .await?
        .into_iter()
        .map(|(node_id, pipeline_id, at, line)| {
            let line = LogLine {
                pipeline_id,
                at,
                line,
            };
            (node_id, line)
        })
        .collect())
}

/// Whether a log line reports a problem: it names an error, a panic, a crash or a failed
/// exit (any case). The rollout view shows such lines of canary nodes first.
pub fn is_error_line(line: &str) -> bool {
    const MARKS: [&str; 8] = [
        "error",
        "panic",
        "fatal",
        "crash",
        "failed",
        "refused",
        "exited with code",
        "killed by signal",
    ];
    let lower = line.to_lowercase();
    MARKS.iter().any(|m| lower.contains(m))
}

/// Stores answers to sample requests (from the samples route or a heartbeat's
/// `sampleResults`; `field` names where they came from in errors). A repeated answer for
/// the same request and component replaces the earlier one.
pub async fn record_samples(
    db: &Db,
    node_id: &str,
    field: &str,
    results: &[SampleResult],
    now: i64,
) -> Result<()> {
    check_samples(field, results)?;
    let mut tx = db.pool.begin().await?;
    for r in results {
        let mut kept = r.clone();
        if let Some(events) = kept.events.as_mut() {
            events.truncate(MAX_SAMPLE_EVENTS);
        }
        sqlx::query(
            "INSERT INTO sample_results (request_id, node_id, component_key, result, at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (request_id, component_key) DO UPDATE SET
                result = excluded.result, at = excluded.at",
        )
        .bind(&r.request_id)
        .bind(node_id)
        .bind(&r.component_key)
        .bind(serde_json::to_string(&kept)?.replace('\0', ""))
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Refuses answers without a request id or component key, naming the field.
pub fn check_samples(field: &str, results: &[SampleResult]) -> Result<()> {
    for (i, r) in results.iter().enumerate() {
        required(format!("{field}[{i}].requestId"), &r.request_id)?;
        required(format!("{field}[{i}].componentKey"), &r.component_key)?;
    }
    Ok(())
}

/// The answers `node_id` sent to `request_id`, per component.
pub async fn sample_results(db: &Db, node_id: &str, request_id: &str) -> Result<Vec<SampleResult>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT result FROM sample_results WHERE node_id = $1 AND request_id = $2
         ORDER BY component_key",
    )
    .bind(node_id)
    .bind(request_id)
    .fetch_all(&db.read)
    .await?;
    rows.into_iter()
        .map(|(json,)| Ok(serde_json::from_str(&json)?))
        .collect()
}

/// Stores a tap's events (or its end, `status` and `reason`), keeping the newest
/// [`MAX_TAP_EVENTS`] of the tap.
pub async fn record_tap(db: &Db, node_id: &str, tap: &TapEvents, now: i64) -> Result<()> {
    required("requestId".into(), &tap.request_id)?;
    required("pipelineId".into(), &tap.pipeline_id)?;
    required("componentId".into(), &tap.component_id)?;
    let mut tx = db.pool.begin().await?;
    let events = tap.events.as_deref().unwrap_or_default();
    let skip = events.len().saturating_sub(MAX_TAP_EVENTS as usize);
    let mut entries: Vec<(&str, serde_json::Value)> = events[skip..]
        .iter()
        .map(|e| (TAP_EVENT, e.clone()))
        .collect();
    if tap.status.is_some() || tap.reason.is_some() {
        let end = serde_json::json!({ "status": tap.status, "reason": tap.reason });
        entries.push((TAP_END, end));
    }
    for (kind, body) in entries {
        sqlx::query(
            "INSERT INTO tap_events (request_id, node_id, pipeline_id, component_id, body, at,
                kind)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&tap.request_id)
        .bind(node_id)
        .bind(&tap.pipeline_id)
        .bind(&tap.component_id)
        .bind(body.to_string().replace('\0', ""))
        .bind(now)
        .bind(kind)
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query(
        "DELETE FROM tap_events WHERE request_id = $1 AND id <= (
            SELECT id FROM tap_events WHERE request_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
    )
    .bind(&tap.request_id)
    .bind(MAX_TAP_EVENTS)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The kind of a tap entry that is an event.
pub const TAP_EVENT: &str = "event";
/// The kind of a tap entry that is the tap's end, `{"status", "reason"}` as the agent said.
pub const TAP_END: &str = "end";

/// One stored tap entry: an event ([`TAP_EVENT`]), or the tap's end ([`TAP_END`]).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct TapEntry {
    pub id: i64,
    pub at: i64,
    pub kind: String,
    pub body: String,
}

/// The entries of tap `request_id` on `node_id` after entry `after` (0 for all), oldest
/// first, at most `limit`.
pub async fn tap_entries(
    db: &Db,
    node_id: &str,
    request_id: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<TapEntry>> {
    Ok(sqlx::query_as(
        "SELECT id, at, kind, body FROM tap_events
         WHERE request_id = $1 AND node_id = $2 AND id > $3 ORDER BY id LIMIT $4",
    )
    .bind(request_id)
    .bind(node_id)
    .bind(after)
    .bind(limit)
    .fetch_all(&db.read)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_those_naming_a_problem() {
        for line in [
            "2026-12-06T10:00:00Z ERROR sink{component_id=out}: connection refused",
            "thread 'main' panicked at src/main.rs:3",
            "process exited with code 78",
            "Healthcheck failed",
        ] {
            assert!(is_error_line(line), "{line}");
        }
        for line in ["INFO vector: Vector has started.", "v2 started (simulated)"] {
            assert!(!is_error_line(line), "{line}");
        }
    }

    #[test]
    fn long_lines_are_cut_at_4_kib_on_a_character_boundary() {
        assert_eq!(storable_line("short"), "short");
        assert_eq!(storable_line("a\0b"), "ab");
        let long = "é".repeat(3000); // 6000 bytes
        let cut = storable_line(&long);
        assert!(cut.len() <= MAX_LINE_BYTES);
        assert!(cut.len() > MAX_LINE_BYTES - 2);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
