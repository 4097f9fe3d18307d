//! When each node last polled, kept in memory and written in batches: a config poll is not a
//! database write. The server flushes every [`FLUSH_EVERY`] in one statement per
//! [`BATCH`] nodes, and once more on a graceful shutdown; a `kill -9` loses at most the
//! last interval's times (the next poll of each node restores them).
//!
//! Reads of node rows overlay what is still pending ([`LastSeen::overlay`]), so a node's
//! status is right the moment it polls. A flush never moves a time backwards: another
//! replica, or a heartbeat written in its own transaction, may have stored a newer one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::nodes::NodeRow;
use crate::{Db, Result};

/// How often the server writes pending last-seen times.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Nodes per UPDATE statement (two bound values each; far below both databases' limits).
const BATCH: usize = 500;

/// Last-seen times not yet written, by node id.
#[derive(Debug, Default)]
pub struct LastSeen {
    pending: Mutex<HashMap<String, i64>>,
}

impl LastSeen {
    /// Records a contact; the latest time per node wins.
    pub fn record(&self, node_id: &str, at: i64) {
        let mut pending = self.lock();
        match pending.get_mut(node_id) {
            Some(t) => *t = (*t).max(at),
            None => {
                pending.insert(node_id.to_string(), at);
            }
        }
    }

    /// Brings rows read from the database up to the contacts not written yet.
    pub fn overlay(&self, nodes: &mut [NodeRow]) {
        self.overlay_by(nodes, |n| (&n.id, &mut n.last_seen_at));
    }

    /// [`LastSeen::overlay`] for any rows: `fields` gives a row's node id and its stored
    /// last-seen time.
    pub fn overlay_by<T>(
        &self,
        rows: &mut [T],
        fields: impl Fn(&mut T) -> (&String, &mut Option<i64>),
    ) {
        let pending = self.lock();
        if pending.is_empty() {
            return;
        }
        for row in rows {
            let (id, last_seen_at) = fields(row);
            if let Some(&at) = pending.get(id) {
                *last_seen_at = Some(last_seen_at.map_or(at, |t| t.max(at)));
            }
        }
    }

    /// Writes every pending time; returns how many nodes were written. On an error the
    /// times are put back (merged with newer ones) for the next flush.
    pub async fn flush(&self, db: &Db) -> Result<usize> {
        let batch: Vec<(String, i64)> = self.lock().drain().collect();
        let mut written = 0;
        for (i, chunk) in batch.chunks(BATCH).enumerate() {
            if let Err(e) = write(db, chunk).await {
                for (id, at) in &batch[i * BATCH..] {
                    self.record(id, *at);
                }
                return Err(e);
            }
            written += chunk.len();
        }
        Ok(written)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        // A panic while holding the lock leaves a map that is still whole: keep using it.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One statement for the chunk: `UPDATE nodes ... FROM (VALUES ...)`, which SQLite (3.33+)
/// and PostgreSQL both read, only ever moving a time forwards.
async fn write(db: &Db, chunk: &[(String, i64)]) -> Result<()> {
    let rows = (0..chunk.len())
        .map(|i| {
            let (id, at) = (db.dialect.param(2 * i + 1), db.dialect.param(2 * i + 2));
            format!("({id}, CAST({at} AS BIGINT))")
        })
        .collect::<Vec<_>>()
        .join(", ");
    let statement = crate::sql!(
        "UPDATE nodes SET last_seen_at = v.column2 FROM (VALUES {rows}) AS v
         WHERE nodes.id = v.column1
           AND (nodes.last_seen_at IS NULL OR nodes.last_seen_at < v.column2)"
    );
    let mut query = sqlx::query(statement);
    for (id, at) in chunk {
        query = query.bind(id).bind(*at);
    }
    query.execute(&db.pool).await?;
    Ok(())
}
