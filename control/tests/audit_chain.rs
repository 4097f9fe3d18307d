//! The audit log's hash chain, on SQLite and PostgreSQL: real operations produce a chain that
//! verifies, an edit made behind the service's back is named by `verify`, and concurrent
//! appenders never fork the chain.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use vf_control::testing::TestDb;
use vf_control::Actor;
use vf_control::{audit, fleet, pipelines, Db};

const T0: i64 = 1_700_000_000_000;

async fn tampering_is_detected(db: Db) {
    let env = fleet::create_environment(&db, &Actor::system("alice"), "staging", T0)
        .await
        .unwrap();
    let p = pipelines::create_pipeline(
        &db,
        &Actor::system("alice"),
        &env.id,
        "logs",
        BTreeMap::new(),
        T0,
    )
    .await
    .unwrap();
    pipelines::deploy(
        &db,
        &Actor::system("alice"),
        &p.id,
        "sources: {}\n",
        "first",
        T0 + 1,
    )
    .await
    .unwrap();
    pipelines::deploy(
        &db,
        &Actor::system("bob"),
        &p.id,
        "sources: {a: 1}\n",
        "second",
        T0 + 2,
    )
    .await
    .unwrap();

    let report = audit::verify(&db).await.unwrap();
    assert_eq!(report.broken, None);
    assert!(report.events >= 4, "{report:?}");

    let created = vf_control::testing::audit_for_target(&db, "pipeline", &p.id, 10)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.action == "pipeline.create")
        .unwrap();
    sqlx::query("UPDATE audit_events SET details = $1 WHERE seq = $2")
        .bind(r#"{"name":"not-logs"}"#)
        .bind(created.seq)
        .execute(&db.pool)
        .await
        .unwrap();
    let report = audit::verify(&db).await.unwrap();
    let broken = report.broken.expect("the edited row is reported");
    assert_eq!(broken.seq, created.seq);

    // The filtered listing finds the same events, newest first.
    let filter = audit::AuditFilter {
        actor: Some("alice".into()),
        action_prefix: Some("pipeline.".into()),
        target_id: Some(p.id.clone()),
        ..Default::default()
    };
    let listed = audit::list(&db, &filter, 50).await.unwrap();
    let actions: Vec<&str> = listed.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, vec!["pipeline.deploy", "pipeline.create"]);
    let since = audit::AuditFilter {
        since: Some(T0 + 2),
        ..Default::default()
    };
    let listed = audit::list(&db, &since, 50).await.unwrap();
    assert!(listed.iter().all(|r| r.at >= T0 + 2) && !listed.is_empty());
}

#[tokio::test]
async fn tampering_with_an_audit_row_is_detected_on_sqlite() {
    let t = TestDb::sqlite();
    tampering_is_detected(t.connect().await).await;
}

#[tokio::test]
async fn tampering_with_an_audit_row_is_detected_on_postgres() {
    let t = TestDb::postgres().await;
    tampering_is_detected(t.connect().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deploys_do_not_fork_the_chain_on_postgres() {
    let t = TestDb::postgres().await;
    let db = t.connect().await;
    let env = fleet::create_environment(&db, &Actor::system("alice"), "prod", T0)
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..6 {
        let p = pipelines::create_pipeline(
            &db,
            &Actor::system("alice"),
            &env.id,
            &format!("p{i}"),
            BTreeMap::new(),
            T0,
        )
        .await
        .unwrap();
        ids.push(p.id);
    }
    for round in 0..3 {
        let deploy = |id: &str| {
            let db = db.clone();
            let id = id.to_string();
            async move {
                // Each round publishes a new config: an identical one is refused.
                let config = format!("sources: {{}}\n# round {round}\n");
                pipelines::deploy(&db, &Actor::system("alice"), &id, &config, "go", T0 + round)
                    .await
                    .unwrap()
            }
        };
        tokio::join!(
            deploy(&ids[0]),
            deploy(&ids[1]),
            deploy(&ids[2]),
            deploy(&ids[3]),
            deploy(&ids[4]),
            deploy(&ids[5]),
        );
    }
    let report = audit::verify(&db).await.unwrap();
    assert_eq!(report.broken, None);
    assert_eq!(report.events, 1 + 6 + 18, "{report:?}");
}
