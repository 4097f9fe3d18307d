//! Heartbeats are answered before their commit, but not without bound: while more than
//! `MAX_PENDING` wait for the writer, a new one is answered only once it is written.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use sqlx::{Connection, SqliteConnection};
use vf_control::heartbeat::{self, MAX_PENDING};
use vf_control::testing::TestDb;
use vf_control::{fleet, Db};
use vf_protocol::{Heartbeat, PipelineReport};

const T0: i64 = 1_700_000_000_000;

fn heartbeat(pipeline_id: &str, events_in: i64) -> Heartbeat {
    Heartbeat {
        pipelines: vec![PipelineReport {
            pipeline_id: pipeline_id.into(),
            version: 1,
            status: "RUNNING".into(),
            events_in: Some(events_in.into()),
            ..PipelineReport::default()
        }],
        ..Heartbeat::default()
    }
}

/// A node and a pipeline of one environment, written straight to the tables.
async fn node_and_pipeline(db: &Db) -> (fleet::NodeRow, String, String) {
    let env = fleet::ensure_environment(db, "queue", T0).await.unwrap();
    sqlx::query(
        "INSERT INTO nodes (id, environment_id, kind, name, hostname, reported_labels,
            operator_labels, poll_interval_ms, enrolled_at)
         VALUES ('node-1', $1, 'vf-agent', 'node-1', 'node-1', '{}', '{}', 5000, $2)",
    )
    .bind(&env.id)
    .bind(T0)
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO pipelines (id, environment_id, name, created_at, updated_at)
         VALUES ('p-1', $1, 'logs', $2, $2)",
    )
    .bind(&env.id)
    .bind(T0)
    .execute(&db.pool)
    .await
    .unwrap();
    let node = fleet::get_node(db, "node-1").await.unwrap();
    (node, env.id, "p-1".to_string())
}

#[tokio::test]
async fn past_the_backlog_limit_a_heartbeat_is_answered_only_once_written() {
    let test_db = TestDb::sqlite();
    let db = test_db.connect().await;
    let (node, env_id, pipeline_id) = node_and_pipeline(&db).await;

    // Another connection holds SQLite's write lock: the writer waits (within busy_timeout).
    let mut holder = SqliteConnection::connect(&test_db.url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .unwrap();

    // Up to the limit, each is answered at once. (This test's runtime has one thread: the
    // writer takes nothing before the test first waits.)
    for events in 1..=MAX_PENDING as i64 {
        let hb = heartbeat(&pipeline_id, events);
        tokio::time::timeout(
            Duration::from_secs(5),
            heartbeat::record_heartbeat(&db, &node, hb, T0 + events),
        )
        .await
        .unwrap_or_else(|_| panic!("heartbeat {events} was not answered at once"))
        .unwrap();
    }
    // One more: it waits for its commit, which waits for the lock.
    let events = MAX_PENDING as i64 + 1;
    let call = heartbeat::record_heartbeat(&db, &node, heartbeat(&pipeline_id, events), T0);
    tokio::pin!(call);
    tokio::select! {
        biased;
        answer = &mut call => panic!("answered before its commit: {answer:?}"),
        _ = tokio::time::sleep(Duration::from_millis(300)) => {}
    }

    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("answered once written")
        .unwrap();
    let view = fleet::fleet(&db, &env_id, T0).await.unwrap();
    assert_eq!(view[0].pipelines[0].events_in, events);
}
