//! Heartbeats written together: group commit, acknowledged before the commit.
//!
//! A heartbeat is queued and answered at once; one writer task takes everything queued and
//! writes it in one transaction, with one statement per table for the batch instead of four
//! per report, then takes what arrived meanwhile. Under load the batch grows by itself; a
//! lone heartbeat is written at once.
//!
//! What an acknowledgement promises:
//! - **The next read sees it.** Reads of node status and counters (fleet views, gate
//!   inputs, charts, `/metrics`) first wait for the heartbeats queued before them
//!   ([`HeartbeatQueue::settled`]), so an answered heartbeat is in the very next read, on
//!   this server.
//! - **A graceful shutdown writes it** (the server settles the queue after the last request).
//! - **A `kill -9` can lose it** (at most the batch being written and what queued behind it,
//!   a few milliseconds of reports). Counters are cumulative, so the node's next report
//!   brings the lost deltas back: only the minute they are counted in moves.
//!
//! A heartbeat that changes the node's facts (labels, versions, host metrics) is answered
//! only after its commit: the fleet generation moves with it and the config the same
//! request serves depends on it. So does every heartbeat while more than [`MAX_PENDING`]
//! wait, which bounds the queue's memory when the database falls behind.
//!
//! When a batch fails, each of its heartbeats is retried alone, so one bad report fails only
//! its own write (its request's, when it waits; logged otherwise).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::{oneshot, watch};

use super::{add_deltas, Counters, Report};
use crate::fleet::STATUS_COLUMNS;
use crate::{ControlError, Db, Result};

/// Rows per multi-row statement: at most 17 bound values each, far below both databases'
/// limits on bound values.
const ROWS_PER_STATEMENT: usize = 200;

/// Heartbeats queued beyond which a new one waits for its commit before it is answered.
pub const MAX_PENDING: usize = 5_000;

/// A checked heartbeat waiting to be written.
#[derive(Debug)]
pub(super) struct Checked {
    pub node_id: String,
    pub environment_id: String,
    /// New node facts, when the heartbeat changed any.
    pub facts: Option<Facts>,
    pub reports: Vec<Report>,
    pub now: i64,
}

/// Node facts a heartbeat reported (each `None` keeps the stored value).
#[derive(Debug)]
pub(super) struct Facts {
    pub agent_version: Option<String>,
    pub vector_version: Option<String>,
    pub labels: Option<String>,
    pub host_metrics: Option<String>,
    /// What the agent said of itself (JSON: agentHealth, deploymentMode, runningAs,
    /// updateError).
    pub agent_report: Option<String>,
}

struct Job {
    heartbeat: Checked,
    /// Answered once the heartbeat is written, or with why it was not.
    done: oneshot::Sender<Result<()>>,
}

#[derive(Default)]
struct Pending {
    jobs: Vec<Job>,
    /// How many heartbeats were ever queued: the last one's sequence number.
    queued: u64,
}

/// The heartbeats waiting for the writer.
pub struct HeartbeatQueue {
    pending: Mutex<Pending>,
    /// Whether a writer task runs: it writes until nothing is pending, then stops.
    writing: AtomicBool,
    /// The sequence number up to which every heartbeat is written (or failed).
    written: watch::Sender<u64>,
    /// Counter deltas capped at [`super::MAX_DELTA_PER_REPORT`] (the server's metric).
    pub capped: Counter,
    /// Heartbeat values ignored because they could not be used, by field
    /// ([`super::values`]; the server's `vectorflow_agent_values_ignored_total`).
    pub ignored: Family<FieldLabel, Counter>,
}

/// The `field` label of ignored agent values: a protocol field without indexes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct FieldLabel {
    pub field: String,
}

impl Default for HeartbeatQueue {
    fn default() -> Self {
        HeartbeatQueue {
            pending: Mutex::default(),
            writing: AtomicBool::new(false),
            written: watch::Sender::new(0),
            capped: Counter::default(),
            ignored: Family::default(),
        }
    }
}

impl std::fmt::Debug for HeartbeatQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeartbeatQueue").finish_non_exhaustive()
    }
}

impl HeartbeatQueue {
    /// Counts one ignored value of `field` (`pipelines[].eventsIn`).
    pub fn ignored(&self, field: &str) {
        self.ignored
            .get_or_create(&FieldLabel {
                field: field.to_string(),
            })
            .inc();
    }

    /// Queues the heartbeat; returns at once, or once it is committed when it changes the
    /// node's facts or the queue is full (see the module documentation).
    pub(super) async fn write(&self, db: &Db, heartbeat: Checked) -> Result<()> {
        let wait = heartbeat.facts.is_some();
        let (done, written) = oneshot::channel();
        let backlog = {
            let mut pending = self.lock();
            pending.jobs.push(Job { heartbeat, done });
            pending.queued += 1;
            pending.jobs.len()
        };
        self.start_writer(db);
        if !wait && backlog <= MAX_PENDING {
            return Ok(());
        }
        written.await.unwrap_or_else(|_| {
            Err(ControlError::Internal(anyhow::anyhow!(
                "the heartbeat writer stopped before answering"
            )))
        })
    }

    /// Returns once every heartbeat queued before the call is written or failed: what a
    /// read of node status or counters waits for, so it sees every acknowledged heartbeat.
    pub async fn settled(&self) {
        let queued = self.lock().queued;
        let mut written = self.written.subscribe();
        // The sender lives as long as the queue: this cannot fail while `self` is borrowed.
        let _ = written.wait_for(|w| *w >= queued).await;
    }

    fn start_writer(&self, db: &Db) {
        if self.writing.swap(true, Ordering::SeqCst) {
            return;
        }
        let db = db.clone();
        tokio::spawn(async move { db.heartbeats.drain(&db).await });
    }

    /// The writer: writes batches until nothing is pending.
    async fn drain(&self, db: &Db) {
        loop {
            let (jobs, last) = {
                let mut pending = self.lock();
                (std::mem::take(&mut pending.jobs), pending.queued)
            };
            if jobs.is_empty() {
                self.writing.store(false, Ordering::SeqCst);
                // A heartbeat queued since the take saw this writer running and left its
                // write to it: go on, unless another writer started meanwhile.
                if self.lock().jobs.is_empty() || self.writing.swap(true, Ordering::SeqCst) {
                    return;
                }
                continue;
            }
            // Its own task: a panic loses this batch (its waiters get an error), not the
            // writer, and `settled` still moves past it.
            let batch = tokio::spawn(write_jobs(db.clone(), self.capped.clone(), jobs));
            if let Err(e) = batch.await {
                tracing::error!("writing a batch of heartbeats failed: {e}");
            }
            self.written.send_replace(last);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves a list that is still whole: keep using it.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn write_jobs(db: Db, capped_total: Counter, jobs: Vec<Job>) {
    let heartbeats: Vec<&Checked> = jobs.iter().map(|j| &j.heartbeat).collect();
    let results = match write_batch(&db, &heartbeats).await {
        Ok(capped) => capped.into_iter().map(Ok).collect(),
        Err(e) if jobs.len() == 1 => vec![Err(e)],
        Err(e) => {
            tracing::warn!(
                heartbeats = jobs.len(),
                "a batch of heartbeats failed ({e}); writing each alone"
            );
            let mut results = Vec::with_capacity(jobs.len());
            for job in &jobs {
                results.push(write_batch(&db, &[&job.heartbeat]).await.map(|c| c[0]));
            }
            results
        }
    };
    for (job, result) in jobs.into_iter().zip(results) {
        let result = result.map(|capped| {
            capped_total.inc_by(capped as u64);
        });
        // Nobody waits for most heartbeats: a failure is then only logged.
        if let Err(Err(e)) = job.done.send(result) {
            tracing::warn!(
                node_id = job.heartbeat.node_id,
                error = e.chain(),
                "a heartbeat was not written"
            );
        }
    }
}

/// What is known about one node's pipeline process before a report: the stored status row,
/// or the previous report of the same batch.
#[derive(Debug, Clone, Copy)]
struct Previous {
    version: Option<i64>,
    pid: Option<i64>,
    counters: Counters,
}

type NodePipeline = (String, String);

/// Writes the heartbeats in one transaction; returns each one's count of capped deltas.
async fn write_batch(db: &Db, heartbeats: &[&Checked]) -> Result<Vec<usize>> {
    let mut tx = db.begin_write().await?;

    // Reports count only for pipelines of the node's own environment. Read by environment,
    // so no pipeline id an agent made up (a NUL, say, which PostgreSQL refuses) reaches SQL.
    let environments: Vec<&str> = heartbeats
        .iter()
        .map(|h| h.environment_id.as_str())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let mut environment_of: HashMap<String, String> = HashMap::new();
    for chunk in environments.chunks(ROWS_PER_STATEMENT) {
        let statement = crate::sql!(
            "SELECT id, environment_id FROM pipelines WHERE environment_id IN ({})",
            db.dialect.params(chunk.len(), 1)
        );
        let mut query = sqlx::query_as::<_, (String, String)>(statement);
        for id in chunk {
            query = query.bind(*id);
        }
        environment_of.extend(query.fetch_all(&mut *tx).await?);
    }
    let known =
        |h: &Checked, r: &Report| environment_of.get(&r.pipeline_id) == Some(&h.environment_id);

    for h in heartbeats {
        let Some(facts) = &h.facts else { continue };
        sqlx::query(
            "UPDATE nodes SET last_seen_at = CASE WHEN last_seen_at > $1 THEN last_seen_at ELSE $1 END,
                agent_version = COALESCE($2, agent_version),
                vector_version = COALESCE($3, vector_version),
                reported_labels = COALESCE($4, reported_labels),
                host_metrics = COALESCE($5, host_metrics),
                agent_report = COALESCE($6, agent_report)
             WHERE id = $7",
        )
        .bind(h.now)
        .bind(&facts.agent_version)
        .bind(&facts.vector_version)
        .bind(&facts.labels)
        .bind(&facts.host_metrics)
        .bind(&facts.agent_report)
        .bind(&h.node_id)
        .execute(&mut *tx)
        .await?;
    }

    // The stored status of every (node, pipeline) reported: the base of the first deltas.
    let keys: Vec<NodePipeline> = heartbeats
        .iter()
        .flat_map(|h| {
            h.reports
                .iter()
                .filter(|r| known(h, r))
                .map(|r| (h.node_id.clone(), r.pipeline_id.clone()))
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let mut previous: HashMap<NodePipeline, Previous> = HashMap::new();
    for chunk in keys.chunks(ROWS_PER_STATEMENT) {
        let statement = crate::sql!(
            "SELECT {STATUS_COLUMNS} FROM node_pipeline_status
             WHERE (node_id, pipeline_id) IN (VALUES {})",
            db.dialect.tuples(chunk.len(), 2, 1)
        );
        let mut query = sqlx::query_as::<_, crate::fleet::PipelineStatusRow>(statement);
        for (node, pipeline) in chunk {
            query = query.bind(node).bind(pipeline);
        }
        for row in query.fetch_all(&mut *tx).await? {
            let before = Previous {
                version: row.version,
                pid: row.pid,
                counters: Counters::of_status(&row),
            };
            previous.insert((row.node_id, row.pipeline_id), before);
        }
    }

    // Deltas in arrival order; the last report of each (node, pipeline) is its new status.
    let mut capped = vec![0; heartbeats.len()];
    let mut status: HashMap<NodePipeline, (&Report, i64, Counters)> = HashMap::new();
    let mut node_minutes: HashMap<(String, String, i64, i64), Counters> = HashMap::new();
    let mut pipeline_minutes: HashMap<(String, i64), Counters> = HashMap::new();
    for (i, h) in heartbeats.iter().enumerate() {
        for r in h.reports.iter().filter(|r| known(h, r)) {
            let key = (h.node_id.clone(), r.pipeline_id.clone());
            // A different version (or pid) means a new process whose counters started from
            // zero, even when they happen to have grown past the old ones.
            let same_process =
                |p: &Previous| p.version == Some(r.version) && (r.pid.is_none() || p.pid == r.pid);
            let before = previous.get(&key).filter(|p| same_process(p));
            let counters = r.counters.keeping(r.unusable, before.map(|p| p.counters));
            let (delta, n) = counters.delta_since(before.map(|p| p.counters)).clamped();
            if n > 0 {
                tracing::warn!(
                    node_id = h.node_id,
                    pipeline_id = r.pipeline_id,
                    capped = n,
                    "absurd counter delta capped at {}",
                    super::MAX_DELTA_PER_REPORT
                );
                capped[i] += n;
            }
            previous.insert(
                key.clone(),
                Previous {
                    version: Some(r.version),
                    pid: r.pid,
                    counters,
                },
            );
            status.insert(key, (r, h.now, counters));
            if delta == Counters::default() {
                continue;
            }
            let minute = super::minute_of(h.now);
            let node_minute = (h.node_id.clone(), r.pipeline_id.clone(), r.version, minute);
            add(node_minutes.entry(node_minute).or_default(), delta);
            add(
                pipeline_minutes
                    .entry((r.pipeline_id.clone(), minute))
                    .or_default(),
                delta,
            );
        }
    }

    let status: Vec<_> = status.into_iter().collect();
    for chunk in status.chunks(ROWS_PER_STATEMENT) {
        let statement = crate::sql!(
            "INSERT INTO node_pipeline_status (node_id, pipeline_id, version, status, events_in,
                events_out, errors_total, events_discarded, bytes_in, bytes_out, uptime_seconds,
                pid, config_checksum, recent_logs, updated_at, failed_version, failed_reason,
                component_metrics)
             VALUES {}
             ON CONFLICT (node_id, pipeline_id) DO UPDATE SET version = excluded.version,
                status = excluded.status, events_in = excluded.events_in,
                events_out = excluded.events_out, errors_total = excluded.errors_total,
                events_discarded = excluded.events_discarded, bytes_in = excluded.bytes_in,
                bytes_out = excluded.bytes_out, uptime_seconds = excluded.uptime_seconds,
                pid = excluded.pid, config_checksum = excluded.config_checksum,
                recent_logs = excluded.recent_logs, updated_at = excluded.updated_at,
                failed_version = excluded.failed_version, failed_reason = excluded.failed_reason,
                component_metrics = excluded.component_metrics",
            db.dialect.tuples(chunk.len(), 18, 1)
        );
        let mut query = sqlx::query(statement);
        for ((node, pipeline), (r, now, counters)) in chunk {
            query = query
                .bind(node)
                .bind(pipeline)
                .bind(r.version)
                .bind(&r.status)
                .bind(counters.events_in)
                .bind(counters.events_out)
                .bind(counters.errors)
                .bind(counters.discarded)
                .bind(counters.bytes_in)
                .bind(counters.bytes_out)
                .bind(r.uptime_seconds)
                .bind(r.pid)
                .bind(&r.config_checksum)
                .bind(&r.recent_logs)
                .bind(*now)
                .bind(r.failed_version)
                .bind(&r.failed_reason)
                .bind(&r.component_metrics);
        }
        query.execute(&mut *tx).await?;
    }
    // A crash of a canary version is checked by the scheduler's next tick.
    let crashed: Vec<(&str, i64)> = (status.iter())
        .filter_map(|((_, pipeline), (r, _, _))| Some((pipeline.as_str(), r.crashed_version()?)))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    if !crashed.is_empty() {
        let now = heartbeats.iter().map(|h| h.now).max().unwrap_or_default();
        crate::releases::check_soon(&mut tx, &crashed, now).await?;
    }

    let node_minutes: Vec<_> = node_minutes.into_iter().collect();
    for chunk in node_minutes.chunks(ROWS_PER_STATEMENT) {
        let statement = crate::sql!(
            "INSERT INTO node_pipeline_metrics (node_id, pipeline_id, version, minute, events_in,
                events_out, errors, events_discarded, bytes_in, bytes_out)
             VALUES {}
             ON CONFLICT (node_id, pipeline_id, version, minute) DO UPDATE SET {}",
            db.dialect.tuples(chunk.len(), 10, 1),
            add_deltas("node_pipeline_metrics")
        );
        let mut query = sqlx::query(statement);
        for ((node, pipeline, version, minute), d) in chunk {
            query = bind_counters(
                query.bind(node).bind(pipeline).bind(*version).bind(*minute),
                d,
            );
        }
        query.execute(&mut *tx).await?;
    }

    let pipeline_minutes: Vec<_> = pipeline_minutes.into_iter().collect();
    for chunk in pipeline_minutes.chunks(ROWS_PER_STATEMENT) {
        let statement = crate::sql!(
            "INSERT INTO pipeline_metrics (pipeline_id, minute, events_in, events_out, errors,
                events_discarded, bytes_in, bytes_out)
             VALUES {}
             ON CONFLICT (pipeline_id, minute) DO UPDATE SET {}",
            db.dialect.tuples(chunk.len(), 8, 1),
            add_deltas("pipeline_metrics")
        );
        let mut query = sqlx::query(statement);
        for ((pipeline, minute), d) in chunk {
            query = bind_counters(query.bind(pipeline).bind(*minute), d);
        }
        query.execute(&mut *tx).await?;
    }

    // A node's facts bump the fleet generation when they changed (SQLite mirrors it).
    if heartbeats.iter().any(|h| h.facts.is_some()) {
        db.commit_mirrored(tx).await?;
    } else {
        tx.commit().await?;
    }
    Ok(capped)
}

type Query<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

fn bind_counters<'q>(query: Query<'q>, d: &Counters) -> Query<'q> {
    query
        .bind(d.events_in)
        .bind(d.events_out)
        .bind(d.errors)
        .bind(d.discarded)
        .bind(d.bytes_in)
        .bind(d.bytes_out)
}

/// Adds `d` to `sum`, saturating: a batch may hold many capped deltas of one pipeline.
fn add(sum: &mut Counters, d: Counters) {
    sum.events_in = sum.events_in.saturating_add(d.events_in);
    sum.events_out = sum.events_out.saturating_add(d.events_out);
    sum.errors = sum.errors.saturating_add(d.errors);
    sum.discarded = sum.discarded.saturating_add(d.discarded);
    sum.bytes_in = sum.bytes_in.saturating_add(d.bytes_in);
    sum.bytes_out = sum.bytes_out.saturating_add(d.bytes_out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_of_capped_deltas_saturate() {
        let mut sum = Counters {
            errors: i64::MAX - 1,
            ..Counters::default()
        };
        add(
            &mut sum,
            Counters {
                errors: 5,
                events_in: 2,
                ..Counters::default()
            },
        );
        assert_eq!(sum.errors, i64::MAX);
        assert_eq!(sum.events_in, 2);
    }
}
