//! The fleet generation: one counter that the database itself bumps, by triggers (migration
//! 0005), in the same transaction as every change to what an agent is served (pipelines,
//! releases) or to how a node is known by its token (the node row, except last-seen times,
//! host metrics and OpAMP protocol state).
//!
//! The config paths keep what they read (a node by its token, an environment's pipelines
//! with their in-flight releases) tagged with the generation it was read at, read in the same
//! snapshot as the data, and use it only while the generation is still that value. Nothing
//! expires by time: a stored answer is either exactly what a fresh read would return, or
//! it is read again.
//!
//! Where the current value comes from:
//! - **PostgreSQL**: one statement per request ([`Db::fleet_generation`]), so a transition
//!   committed through one server replica is what every replica serves on its next poll.
//! - **SQLite**: one server process owns the file and every write goes through its single
//!   writing connection, so the process mirrors the counter in memory. A write transaction
//!   reads the counter just before committing ([`Db::commit_mirrored`]) and the
//!   mirror takes the value once the commit is done ([`FleetGeneration::saw`]). A read that
//!   finds a newer value (a commit whose mirror update has not landed yet) raises the mirror
//!   before anything it read is served, so nothing older is served after it. A poll then
//!   needs no statement at all.
//!
//! So on both databases an answer is never older than one already given: the generation a
//! request trusts only grows.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::db::{Db, Dialect};
use crate::Result;

/// The statement reading the counter (one row).
pub(crate) const READ_GENERATION: &str = "SELECT value FROM fleet_generation WHERE id = 1";

/// The highest fleet generation this process has seen committed.
#[derive(Debug, Default)]
pub struct FleetGeneration {
    seen: AtomicI64,
}

impl FleetGeneration {
    /// The highest generation seen so far.
    pub fn seen(&self) -> i64 {
        self.seen.load(Ordering::Acquire)
    }

    /// Records a generation read from the database (it never goes down).
    pub fn saw(&self, generation: i64) {
        self.seen.fetch_max(generation, Ordering::AcqRel);
    }
}

impl Db {
    /// The fleet generation now: on PostgreSQL read (one statement), on SQLite the mirror.
    pub async fn fleet_generation(&self) -> Result<i64> {
        match self.dialect {
            Dialect::Sqlite => Ok(self.generation.seen()),
            Dialect::Postgres => {
                let generation: i64 = sqlx::query_scalar(READ_GENERATION)
                    .fetch_one(&self.read)
                    .await?;
                self.generation.saw(generation);
                Ok(generation)
            }
        }
    }

    /// Commits a write transaction that may have bumped the generation. On SQLite the
    /// counter is read inside it, after its writes (so it includes their triggers' bumps),
    /// and the mirror takes that value once the commit is done. PostgreSQL needs no mirror:
    /// a plain commit.
    pub(crate) async fn commit_mirrored(
        &self,
        mut tx: sqlx::Transaction<'static, sqlx::Any>,
    ) -> Result<()> {
        let generation: Option<i64> = match self.dialect {
            Dialect::Sqlite => Some(
                sqlx::query_scalar(READ_GENERATION)
                    .fetch_one(&mut *tx)
                    .await?,
            ),
            Dialect::Postgres => None,
        };
        tx.commit().await?;
        if let Some(generation) = generation {
            self.generation.saw(generation);
        }
        Ok(())
    }

    /// Brings the SQLite mirror up to date after a write that did not go through an audited
    /// transaction or the heartbeat writer (tests that edit rows directly). Harmless on
    /// PostgreSQL.
    pub async fn refresh_generation(&self) -> Result<()> {
        let generation: i64 = sqlx::query_scalar(READ_GENERATION)
            .fetch_one(&self.pool)
            .await?;
        self.generation.saw(generation);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_never_goes_down() {
        let g = FleetGeneration::default();
        g.saw(5);
        g.saw(3);
        assert_eq!(g.seen(), 5);
        g.saw(6);
        assert_eq!(g.seen(), 6);
    }
}
