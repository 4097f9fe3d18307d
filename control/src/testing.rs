//! Test support: databases (a temporary SQLite file, or a fresh uniquely named PostgreSQL
//! database created through `VF_TEST_POSTGRES_URL`, set by `scripts/postgres.sh` via
//! `make test`) and reads that only tests make.

use crate::audit::{AuditRow, COLUMNS as AUDIT_COLUMNS};
use crate::heartbeat::MinuteRow;
use crate::{sql, Db, Result};

/// A database that lives as long as this value (the SQLite file is deleted on drop).
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("vf.db").display());
        TestDb {
            url,
            _dir: Some(dir),
        }
    }

    /// A fresh database on the local PostgreSQL. Panics with instructions when the server
    /// is not configured: a PostgreSQL test must never pass by not running.
    pub async fn postgres() -> TestDb {
        use sqlx::Connection;
        sqlx::any::install_default_drivers();
        let admin = std::env::var("VF_TEST_POSTGRES_URL").expect(
            "VF_TEST_POSTGRES_URL is not set: run `make test`, or `scripts/postgres.sh` and export the URL it prints",
        );
        let name = format!("vf_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::AnyConnection::connect(&admin)
            .await
            .expect("connect to VF_TEST_POSTGRES_URL");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create test database");
        let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
        TestDb {
            url: format!("{base}/{name}"),
            _dir: None,
        }
    }

    pub async fn connect(&self) -> Db {
        Db::connect(&self.url).await.expect("connect test database")
    }
}

/// The newest audit events of one target (pipeline, release...), newest first.
pub async fn audit_for_target(
    db: &Db,
    target_kind: &str,
    target_id: &str,
    limit: i64,
) -> Result<Vec<AuditRow>> {
    Ok(sqlx::query_as::<_, AuditRow>(sql!(
        "SELECT {AUDIT_COLUMNS} FROM audit_events WHERE target_kind = $1 AND target_id = $2
         ORDER BY seq DESC LIMIT $3"
    ))
    .bind(target_kind)
    .bind(target_id)
    .bind(limit)
    .fetch_all(&db.pool)
    .await?)
}

/// A pipeline's per-minute aggregates from `since` on, oldest first.
pub async fn pipeline_minutes(db: &Db, pipeline_id: &str, since: i64) -> Result<Vec<MinuteRow>> {
    db.heartbeats.settled().await;
    Ok(sqlx::query_as::<_, MinuteRow>(
        "SELECT minute, events_in, events_out, errors FROM pipeline_metrics
         WHERE pipeline_id = $1 AND minute >= $2 ORDER BY minute",
    )
    .bind(pipeline_id)
    .bind(since)
    .fetch_all(&db.pool)
    .await?)
}

/// One config answer as a test records it: pipeline id -> version served.
pub type ServedVersions = std::collections::BTreeMap<String, i64>;

/// Every way a node's recorded answers break fencing's promise, described: a pipeline's
/// version stepping back, or a pipeline the node was running vanishing. `answers` are in
/// the order the node got them, each with where it came from (a replica's name, or "").
pub fn fencing_violations(node: &str, answers: &[(String, ServedVersions)]) -> Vec<String> {
    let mut seen: std::collections::BTreeMap<&str, i64> = Default::default();
    let mut found = Vec::new();
    for (i, (from, answer)) in answers.iter().enumerate() {
        for (pipeline, before) in &seen {
            match answer.get(*pipeline) {
                None => found.push(format!(
                    "{node} poll {i} {from}: {pipeline} vanished (was v{before})"
                )),
                Some(now) if now < before => found.push(format!(
                    "{node} poll {i} {from}: {pipeline} went v{before} -> v{now}"
                )),
                Some(_) => {}
            }
        }
        for (pipeline, version) in answer {
            seen.insert(pipeline, *version);
        }
    }
    found
}
