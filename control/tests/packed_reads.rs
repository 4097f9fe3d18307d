//! Whole-fleet reads come packed into one JSON value by SQLite, as plain rows from
//! PostgreSQL (`Db::bulk_rows`).
//! They must return exactly what a row-by-row read returns, for any text an agent can send
//! and any counter it can report, on SQLite and on PostgreSQL.

#![allow(clippy::unwrap_used)]

use vf_control::fleet::{self, NodeRow, PipelineStatusRow};
use vf_control::testing::TestDb;
use vf_control::Db;

const T0: i64 = 1_700_000_000_000;

/// Names, labels and messages that JSON has to escape, or that look like JSON themselves.
const AWKWARD: [&str; 6] = [
    "plain",
    "quote \" and backslash \\ and slash /",
    "tab\tnewline\nreturn\r and \u{1} \u{1f}",
    "ünïcødé 日本 🚀",
    "{\"looks\": [\"like\", \"json\"]}",
    "",
];

async fn insert_node(db: &Db, env_id: &str, i: usize, text: &str) -> String {
    let id = format!("node-{i}");
    let labels = serde_json::json!({ "k": text, text: "v" }).to_string();
    sqlx::query(
        "INSERT INTO nodes (id, environment_id, kind, name, hostname, os, agent_version,
            vector_version, reported_labels, operator_labels, poll_interval_ms, enrolled_at,
            last_seen_at, disconnected_at)
         VALUES ($1, $2, 'vf-agent', $3, $4, $5, NULL, $6, $7, $8, $9, $10, $11, NULL)",
    )
    .bind(&id)
    .bind(env_id)
    .bind(format!("{text}-{i}"))
    .bind(text)
    .bind(text)
    .bind(text)
    .bind(&labels)
    .bind(if i.is_multiple_of(2) {
        "{}"
    } else {
        "{\"k\":\"operator\"}"
    })
    .bind(5_000_i64)
    .bind(T0 + i as i64)
    .bind(if i.is_multiple_of(3) {
        None
    } else {
        Some(i64::MAX - i as i64)
    })
    .execute(&db.pool)
    .await
    .unwrap();
    id
}

async fn insert_status(db: &Db, node_id: &str, text: &str, big: i64) {
    sqlx::query(
        "INSERT INTO node_pipeline_status (node_id, pipeline_id, version, status, events_in,
            events_out, errors_total, events_discarded, bytes_in, bytes_out, uptime_seconds,
            pid, config_checksum, message, updated_at)
         VALUES ($1, 'p-1', $2, 'RUNNING', $3, $4, $5, 0, $6, 0, NULL, $7, $8, $9, $10)",
    )
    .bind(node_id)
    .bind(Some(big))
    .bind(big)
    .bind(-big)
    .bind(i64::MIN)
    .bind(i64::MAX)
    .bind(None::<i64>)
    .bind(Some(text))
    .bind(text)
    .bind(T0)
    .execute(&db.pool)
    .await
    .unwrap();
}

async fn packed_reads_match_row_by_row_reads(db: Db) {
    let env = fleet::ensure_environment(&db, "packed", T0).await.unwrap();
    let empty = fleet::ensure_environment(&db, "empty", T0).await.unwrap();
    // Reports are read as those of the environment's pipelines.
    for id in ["p-1", "p-2"] {
        sqlx::query(
            "INSERT INTO pipelines (id, environment_id, name, created_at, updated_at)
             VALUES ($1, $2, $1, $3, $3)",
        )
        .bind(id)
        .bind(&env.id)
        .bind(T0)
        .execute(&db.pool)
        .await
        .unwrap();
    }
    for (i, text) in AWKWARD.iter().enumerate() {
        let id = insert_node(&db, &env.id, i, text).await;
        insert_status(&db, &id, text, i64::MAX - i as i64).await;
    }
    // A second pipeline's report, STOPPED and fresh: it degrades node-1 in every view.
    sqlx::query(
        "INSERT INTO node_pipeline_status (node_id, pipeline_id, status, updated_at)
         VALUES ('node-1', 'p-2', 'STOPPED', $1)",
    )
    .bind(i64::MAX)
    .execute(&db.pool)
    .await
    .unwrap();

    let mut row_by_row: Vec<NodeRow> = sqlx::query_as(
        "SELECT id, environment_id, kind, name, hostname, os, agent_version, vector_version,
            reported_labels, operator_labels, poll_interval_ms, enrolled_at, last_seen_at,
            disconnected_at, revoked_at
         FROM nodes WHERE environment_id = $1",
    )
    .bind(&env.id)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    // By name then id, compared as bytes on both databases (whatever PostgreSQL's collation).
    row_by_row.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    assert_eq!(row_by_row.len(), AWKWARD.len());
    assert_eq!(fleet::list_nodes(&db, &env.id).await.unwrap(), row_by_row);

    let mut statuses: Vec<PipelineStatusRow> = sqlx::query_as(
        "SELECT node_id, pipeline_id, version, status, events_in, events_out, errors_total,
            events_discarded, bytes_in, bytes_out, uptime_seconds, pid, config_checksum,
            message, updated_at
         FROM node_pipeline_status ORDER BY node_id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let views = fleet::fleet(&db, &env.id, T0).await.unwrap();
    let mut packed: Vec<PipelineStatusRow> = views.into_iter().flat_map(|v| v.pipelines).collect();
    packed.sort_by(|a, b| (&a.node_id, &a.pipeline_id).cmp(&(&b.node_id, &b.pipeline_id)));
    statuses.sort_by(|a, b| (&a.node_id, &a.pipeline_id).cmp(&(&b.node_id, &b.pipeline_id)));
    assert_eq!(packed, statuses);

    // A pipeline's views read seven columns of the same nodes and reports.
    let views = fleet::fleet(&db, &env.id, T0).await.unwrap();
    let brief = fleet::pipeline_nodes(&db, &env.id, "p-1", T0)
        .await
        .unwrap();
    assert_eq!(brief.len(), views.len());
    for (b, v) in brief.iter().zip(&views) {
        assert_eq!(
            (&b.id, &b.name, &*b.labels),
            (&v.node.id, &v.node.name, &v.labels)
        );
        assert_eq!(b.status, v.status, "{}", b.id);
        let report = v.pipelines.iter().find(|p| p.pipeline_id == "p-1").unwrap();
        let b_report = b.report.as_ref().unwrap();
        assert_eq!(
            (
                b_report.version,
                &b_report.status,
                b_report.events_in,
                b_report.errors_total
            ),
            (
                report.version,
                &report.status,
                report.events_in,
                report.errors_total
            )
        );
    }
    let stopped = brief.iter().find(|b| b.id == "node-1").unwrap();
    assert_eq!(stopped.status, fleet::NodeStatus::Degraded);

    assert!(fleet::list_nodes(&db, &empty.id).await.unwrap().is_empty());
    assert!(fleet::pipeline_nodes(&db, &empty.id, "p-1", T0)
        .await
        .unwrap()
        .is_empty());
    assert!(fleet::fleet(&db, &empty.id, T0).await.unwrap().is_empty());
}

#[tokio::test]
async fn packed_reads_match_row_by_row_reads_on_sqlite() {
    let test_db = TestDb::sqlite();
    packed_reads_match_row_by_row_reads(test_db.connect().await).await;
}

#[tokio::test]
async fn packed_reads_match_row_by_row_reads_on_postgres() {
    let test_db = TestDb::postgres().await;
    packed_reads_match_row_by_row_reads(test_db.connect().await).await;
}
