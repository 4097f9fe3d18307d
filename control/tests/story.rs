//! One story through the data-access layer, run on SQLite and on PostgreSQL: an environment
//! is created, a node enrolls and reports, a pipeline is deployed twice and its config,
//! status, metrics and audit trail read back the same on both databases.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use vf_control::testing::TestDb;
use vf_control::Actor;
use vf_control::{agent, fleet, heartbeat, pipelines, ControlError, Db};
use vf_protocol::{EnrollRequest, Heartbeat, PipelineReport};

const T0: i64 = 1_700_000_000_000;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn report(pipeline_id: &str, version: i64, events_in: i64, errors: i64) -> PipelineReport {
    PipelineReport {
        pipeline_id: pipeline_id.into(),
        version,
        status: "RUNNING".into(),
        events_in: Some(events_in.into()),
        events_out: Some(events_in.into()),
        errors_total: Some(errors.into()),
        ..PipelineReport::default()
    }
}

async fn story(db: Db) {
    let ctl = vf_control::Control::new(
        db.clone(),
        std::sync::Arc::new(vf_control::clock::ManualClock::new(T0)),
        vf_control::Settings::default(),
    );
    // Environment and bootstrap token, idempotently.
    let env = fleet::ensure_environment(&db, "staging", T0).await.unwrap();
    assert_eq!(
        fleet::ensure_environment(&db, "staging", T0).await.unwrap(),
        env
    );
    let token = "bootstrap-token-0123456789";
    fleet::create_enrollment_token(
        &db,
        &Actor::system("system"),
        &env.id,
        Some(token),
        "boot",
        T0,
    )
    .await
    .unwrap();
    let (_, again) = fleet::create_enrollment_token(
        &db,
        &Actor::system("system"),
        &env.id,
        Some(token),
        "boot",
        T0,
    )
    .await
    .unwrap();
    assert!(again.is_none(), "the same bootstrap token registers once");

    // Enrollment: a wrong token is refused, a right one yields a node token stored hashed.
    let bad = agent::enroll(
        &db,
        EnrollRequest {
            token: "nope-nope-nope-nope".into(),
            hostname: "h".into(),
            os: None,
            agent_version: None,
            vector_version: None,
            labels: None,
        },
        5_000,
        T0,
    )
    .await;
    assert!(matches!(bad, Err(ControlError::Unauthorized)));
    let enrolled = agent::enroll(
        &db,
        EnrollRequest {
            token: token.into(),
            hostname: "edge-1".into(),
            os: Some("linux".into()),
            agent_version: Some("1.0.0".into()),
            vector_version: None,
            labels: Some(labels(&[("tier", "edge")])),
        },
        5_000,
        T0,
    )
    .await
    .unwrap();
    let known = agent::node_for_token(&ctl, &enrolled.node_token)
        .await
        .unwrap();
    assert_eq!(known.labels, labels(&[("tier", "edge")]));
    let node = known.node.clone();
    let stored: String = sqlx::query_scalar("SELECT token_hash FROM nodes WHERE id = $1")
        .bind(&node.id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_ne!(stored, enrolled.node_token, "node tokens are stored hashed");

    // A pipeline for edge nodes only, deployed twice: versions are numbered 1, 2.
    let p = pipelines::create_pipeline(
        &db,
        &Actor::system("alice"),
        &env.id,
        "logs",
        labels(&[("tier", "edge")]),
        T0,
    )
    .await
    .unwrap();
    let config = agent::config_for_node(&ctl, &node, 5_000).await.unwrap();
    let (doc, etag_before, _) = (
        config.document(),
        config.etag.clone(),
        config.kinds().collect::<Vec<_>>(),
    );
    assert!(doc.pipelines.is_empty(), "nothing deployed yet");
    let v1 = pipelines::deploy(
        &db,
        &Actor::system("alice"),
        &p.id,
        "sources: {}\n",
        "first",
        T0,
    )
    .await
    .unwrap();
    let v2 = pipelines::deploy(
        &db,
        &Actor::system("alice"),
        &p.id,
        "sources: {a: 1}\n",
        "second",
        T0 + 1,
    )
    .await
    .unwrap();
    assert_eq!((v1.version, v2.version), (1, 2));
    let config = agent::config_for_node(&ctl, &node, 5_000).await.unwrap();
    let (doc, etag_after, kinds) = (
        config.document(),
        config.etag.clone(),
        config.kinds().collect::<Vec<_>>(),
    );
    assert_eq!(doc.pipelines.len(), 1);
    assert_eq!(doc.pipelines[0].version, 2);
    assert_eq!(doc.pipelines[0].checksum, v2.checksum);
    assert_eq!(kinds, vec!["deployed"]);
    assert_ne!(etag_before, etag_after, "the ETag follows what is served");
    let diff = pipelines::diff_versions(&db, &p.id, 1, 2).await.unwrap();
    assert!(diff
        .iter()
        .any(|l| l.op == '+' && l.text == "sources: {a: 1}"));

    // Operator labels win over reported ones: relabelled, the node leaves the selector.
    fleet::set_operator_labels(
        &db,
        &Actor::system("alice"),
        &node.id,
        labels(&[("tier", "core")]),
        T0,
    )
    .await
    .unwrap();
    let node = fleet::get_node(&db, &node.id).await.unwrap();
    let config = agent::config_for_node(&ctl, &node, 5_000).await.unwrap();
    let (doc, _, kinds) = (
        config.document(),
        config.etag.clone(),
        config.kinds().collect::<Vec<_>>(),
    );
    assert!(doc.pipelines.is_empty());
    assert_eq!(kinds, vec!["not_selected"]);
    fleet::set_operator_labels(&db, &Actor::system("alice"), &node.id, BTreeMap::new(), T0)
        .await
        .unwrap();
    let node = fleet::get_node(&db, &node.id).await.unwrap();

    // Heartbeats: cumulative counters become per-minute deltas; a reset counts whole.
    let hb = |events, errors| Heartbeat {
        pipelines: vec![report(&p.id, 2, events, errors)],
        ..Heartbeat::default()
    };
    heartbeat::record_heartbeat(&db, &node, hb(100, 1), T0)
        .await
        .unwrap();
    heartbeat::record_heartbeat(&db, &node, hb(250, 3), T0 + 10_000)
        .await
        .unwrap();
    heartbeat::record_heartbeat(&db, &node, hb(40, 0), T0 + 70_000)
        .await
        .unwrap();
    let minutes = vf_control::testing::pipeline_minutes(&db, &p.id, 0)
        .await
        .unwrap();
    let totals: Vec<(i64, i64)> = minutes.iter().map(|m| (m.events_in, m.errors)).collect();
    assert_eq!(totals, vec![(250, 3), (40, 0)]);

    // Unknown process statuses are kept as reported; the fleet view derives node status.
    let mut odd = report(&p.id, 2, 40, 0);
    odd.status = "WARMING_UP".into();
    let hb = Heartbeat {
        pipelines: vec![odd],
        ..Heartbeat::default()
    };
    heartbeat::record_heartbeat(&db, &node, hb, T0 + 71_000)
        .await
        .unwrap();
    let view = fleet::fleet(&db, &env.id, T0 + 72_000).await.unwrap();
    assert_eq!(view.len(), 1);
    assert_eq!(view[0].pipelines[0].status, "WARMING_UP");
    assert_eq!(view[0].status, fleet::NodeStatus::Healthy);
    let later = fleet::fleet(&db, &env.id, T0 + 71_000 + 15_001)
        .await
        .unwrap();
    assert_eq!(later[0].status, fleet::NodeStatus::Unreachable);

    // A pipeline reported STOPPED degrades the node while it is reported, not after: an
    // agent reports a removed pipeline STOPPED once and then leaves it out.
    let mut stopped = report(&p.id, 2, 40, 0);
    stopped.status = "STOPPED".into();
    let hb = Heartbeat {
        pipelines: vec![stopped],
        ..Heartbeat::default()
    };
    heartbeat::record_heartbeat(&db, &node, hb, T0 + 80_000)
        .await
        .unwrap();
    let view = fleet::fleet(&db, &env.id, T0 + 80_000).await.unwrap();
    assert_eq!(view[0].status, fleet::NodeStatus::Degraded);
    heartbeat::record_heartbeat(&db, &node, Heartbeat::default(), T0 + 90_000)
        .await
        .unwrap();
    let view = fleet::fleet(&db, &env.id, T0 + 90_000).await.unwrap();
    assert_eq!(view[0].status, fleet::NodeStatus::Healthy);

    // Node groups are criteria, not membership.
    let g = fleet::create_node_group(
        &db,
        &Actor::system("alice"),
        &env.id,
        "edge",
        labels(&[("tier", "edge")]),
        T0,
    )
    .await
    .unwrap();
    assert_eq!(g.criteria(), labels(&[("tier", "edge")]));
    let dup = fleet::create_node_group(
        &db,
        &Actor::system("alice"),
        &env.id,
        "edge",
        BTreeMap::new(),
        T0,
    )
    .await;
    assert!(matches!(dup, Err(ControlError::Conflict(_))));

    // Every change is attributable.
    let trail = vf_control::testing::audit_for_target(&db, "pipeline", &p.id, 10)
        .await
        .unwrap();
    let actions: Vec<&str> = trail.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(
        actions,
        vec!["pipeline.deploy", "pipeline.deploy", "pipeline.create"]
    );
}

#[tokio::test]
async fn the_fleet_story_holds_on_sqlite() {
    let t = TestDb::sqlite();
    story(t.connect().await).await;
}

#[tokio::test]
async fn the_fleet_story_holds_on_postgres() {
    let t = TestDb::postgres().await;
    story(t.connect().await).await;
}
