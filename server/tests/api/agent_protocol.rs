//! Real vf-agents against the real server: enrollment, delivery, reports, node selection,
//! and the ETag / POST round trip of `/api/agent/config`.

use reqwest::StatusCode;
use serde_json::json;
use vf_agent::{
    ApplySummary, PipelineStatus, PollOutcome, SimSettings, SimulationOptions, Simulator,
};
use vf_control::fleet::NodeStatus;
use vf_protocol::ConfigResponse;

use crate::helpers::{etag, labels, TestApp, MINUTE, T0};

/// Simulated nodes running this report 10% of their events as errors.
const CONFIG_V1: &str = "sources:\n  in: {type: demo_logs}\n# vf-simulate: error_rate=0.1\n";
const CONFIG_V2: &str = "sources:\n  in: {type: demo_logs, interval: 2}\n";

fn started(ids: &[&str]) -> PollOutcome {
    PollOutcome::Applied(ApplySummary {
        started: ids.iter().map(|id| id.to_string()).collect(),
        ..ApplySummary::default()
    })
}

/// Enroll with the bootstrap token, receive the deployed pipeline, write it, report it
/// RUNNING, and see the counters land in per-minute metrics.
async fn enroll_deploy_poll_story(app: TestApp) {
    let pipeline = app.create_pipeline("logs", &[]).await;
    let v1 = app.deploy(&pipeline.id, CONFIG_V1).await;
    let mut agent = app
        .start_simulated_agent("edge-1", &[("tier", "edge")])
        .await;
    assert_eq!(agent.environment_id(), app.env_id);

    assert_eq!(agent.poll_once().await.unwrap(), started(&[&pipeline.id]));
    let written = std::fs::read_to_string(app.pipeline_file("edge-1", &pipeline.id)).unwrap();
    assert_eq!(written, CONFIG_V1);
    let held = agent.running();
    assert_eq!(held.len(), 1);
    assert_eq!(
        (held[0].version, held[0].status, held[0].checksum.as_str()),
        (1, PipelineStatus::Running, v1.checksum.as_str())
    );

    // The next round trip reports; nothing changed, so the config answer is a 304.
    assert_eq!(agent.poll_once().await.unwrap(), PollOutcome::NotModified);
    let view = app.node_view(agent.node_id()).await;
    assert_eq!(view.node.hostname, "edge-1");
    assert_eq!(view.node.agent_version.as_deref(), Some("1.2.3"));
    assert_eq!(view.labels, labels(&[("tier", "edge")]));
    assert_eq!(view.status, NodeStatus::Healthy);
    assert_eq!(view.pipelines.len(), 1);
    let report = &view.pipelines[0];
    assert_eq!(report.pipeline_id, pipeline.id);
    assert_eq!(report.version, Some(1));
    assert_eq!(report.status, "RUNNING");
    assert_eq!(
        report.config_checksum.as_deref(),
        Some(v1.checksum.as_str())
    );
    assert_eq!((report.events_in, report.errors_total), (100, 10));

    // A minute later the next 100 events (10 errors) count in the next minute.
    app.clock.advance_ms(MINUTE);
    assert_eq!(agent.poll_once().await.unwrap(), PollOutcome::NotModified);
    let minutes: Vec<(i64, i64, i64, i64)> = app
        .minutes(&pipeline.id)
        .await
        .iter()
        .map(|m| (m.minute, m.events_in, m.events_out, m.errors))
        .collect();
    assert_eq!(
        minutes,
        vec![(T0, 100, 100, 10), (T0 + MINUTE, 100, 100, 10)]
    );
    let view = app.node_view(agent.node_id()).await;
    assert_eq!(view.node.last_seen_at, Some(T0 + MINUTE));
}

#[tokio::test]
async fn a_real_agent_enrolls_runs_the_deployed_pipeline_and_its_counters_become_minutes() {
    enroll_deploy_poll_story(TestApp::spawn().await).await;
}

#[tokio::test]
async fn the_enroll_deploy_poll_story_holds_on_postgres() {
    enroll_deploy_poll_story(TestApp::spawn_postgres().await).await;
}

#[tokio::test]
async fn a_new_deploy_restarts_a_running_agent_on_the_new_version() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, CONFIG_V1).await;
    let mut agent = app.start_agent("edge-1", &[]).await;
    agent.poll_once().await.unwrap();

    let v2 = app.deploy(&pipeline.id, CONFIG_V2).await;
    assert_eq!(agent.poll_once().await.unwrap(), started(&[&pipeline.id]));
    agent.poll_once().await.unwrap();

    let written = std::fs::read_to_string(app.pipeline_file("edge-1", &pipeline.id)).unwrap();
    assert_eq!(written, CONFIG_V2);
    let report = &app.node_view(agent.node_id()).await.pipelines[0];
    assert_eq!(report.version, Some(2));
    assert_eq!(report.status, "RUNNING");
    assert_eq!(
        report.config_checksum.as_deref(),
        Some(v2.checksum.as_str())
    );
}

#[tokio::test]
async fn a_pipeline_whose_node_selector_excludes_a_node_is_absent_from_its_config() {
    let app = TestApp::spawn().await;
    let zone_a = app.create_pipeline("zone-a", &[("zone", "z0")]).await;
    let everywhere = app.create_pipeline("everywhere", &[]).await;
    app.deploy(&zone_a.id, CONFIG_V1).await;
    app.deploy(&everywhere.id, CONFIG_V2).await;
    let options = app.agent_options("sim", &[("zone", "z{i%2}")]);
    let simulation = SimulationOptions {
        nodes: 4,
        hostname_template: "sim-{i}".to_string(),
        settings: SimSettings::default(),
    };
    let mut fleet = Simulator::start(options, simulation).await.unwrap();

    for result in fleet.poll_all_once().await {
        result.unwrap();
    }

    for agent in fleet.agents() {
        let mut held: Vec<String> = agent
            .last_config()
            .unwrap()
            .pipelines
            .iter()
            .map(|p| p.pipeline_id.clone())
            .collect();
        held.sort();
        let running: Vec<String> = agent.running().into_iter().map(|p| p.pipeline_id).collect();
        let in_zone_a = matches!(agent.hostname(), "sim-0" | "sim-2");
        let mut expected = vec![everywhere.id.clone()];
        if in_zone_a {
            expected.push(zone_a.id.clone());
        }
        expected.sort();
        assert_eq!(held, expected, "{}", agent.hostname());
        assert_eq!(running, expected, "{}", agent.hostname());
    }
}

#[tokio::test]
async fn an_agent_stops_a_pipeline_once_an_operator_relabels_its_node_out_of_the_selector() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("edge-logs", &[("tier", "edge")]).await;
    app.deploy(&pipeline.id, CONFIG_V1).await;
    let mut agent = app.start_agent("edge-1", &[("tier", "edge")]).await;
    assert_eq!(agent.poll_once().await.unwrap(), started(&[&pipeline.id]));
    agent.poll_once().await.unwrap();
    let file = app.pipeline_file("edge-1", &pipeline.id);
    assert!(file.exists());

    app.set_operator_labels(agent.node_id(), &[("tier", "core")])
        .await;
    let outcome = agent.poll_once().await.unwrap();

    assert_eq!(
        outcome,
        PollOutcome::Applied(ApplySummary {
            stopped: vec![pipeline.id.clone()],
            ..ApplySummary::default()
        })
    );
    assert!(agent.running().is_empty());
    assert!(!file.exists(), "the stopped pipeline's config is removed");
    // The agent keeps reporting tier=edge, but the operator's label wins.
    agent.poll_once().await.unwrap();
    let view = app.node_view(agent.node_id()).await;
    assert_eq!(view.labels, labels(&[("tier", "core")]));
    assert_eq!(view.pipelines[0].status, "STOPPED");
    assert!(agent.last_config().unwrap().pipelines.is_empty());
}

#[tokio::test]
async fn an_unchanged_config_is_answered_304_and_a_new_deploy_changes_the_etag() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, CONFIG_V1).await;
    let node = app.enroll("etag-1", &[]).await;

    let first = app.get_config(&node.node_token, None).await;
    assert_eq!(first.status(), StatusCode::OK);
    let first_etag = etag(&first);
    let doc: ConfigResponse = first.json().await.unwrap();
    assert_eq!(doc.pipelines[0].version, 1);

    let again = app.get_config(&node.node_token, Some(&first_etag)).await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(etag(&again), first_etag);
    assert!(again.bytes().await.unwrap().is_empty());

    let v2 = app.deploy(&pipeline.id, CONFIG_V2).await;
    let after = app.get_config(&node.node_token, Some(&first_etag)).await;
    assert_eq!(after.status(), StatusCode::OK);
    let second_etag = etag(&after);
    assert_ne!(second_etag, first_etag);
    let doc: ConfigResponse = after.json().await.unwrap();
    assert_eq!(doc.pipelines.len(), 1);
    assert_eq!(doc.pipelines[0].version, 2);
    assert_eq!(doc.pipelines[0].checksum, v2.checksum);
    assert_eq!(doc.pipelines[0].config_yaml, CONFIG_V2);

    let settled = app.get_config(&node.node_token, Some(&second_etag)).await;
    assert_eq!(settled.status(), StatusCode::NOT_MODIFIED);
}

#[tokio::test]
async fn a_config_post_carrying_a_heartbeat_records_it_and_serves_the_config() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, CONFIG_V1).await;
    let node = app.enroll("edge-1", &[]).await;
    app.clock.advance_ms(1_000);

    let body = json!({
        "pipelines": [{
            "pipelineId": pipeline.id, "version": 1, "status": "RUNNING",
            "eventsIn": 42, "eventsOut": 40, "errorsTotal": 2
        }],
        "agentVersion": "9.9.9"
    });
    let resp = app.post_config(&node.node_token, body.to_string()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let doc: ConfigResponse = resp.json().await.unwrap();
    assert_eq!(doc.pipelines[0].pipeline_id, pipeline.id);
    assert_eq!(doc.secret_backend, "BUILTIN");
    let view = app.node_view(&node.node_id).await;
    assert_eq!(view.node.agent_version.as_deref(), Some("9.9.9"));
    assert_eq!(view.node.last_seen_at, Some(T0 + 1_000));
    let report = &view.pipelines[0];
    assert_eq!(
        (
            report.status.as_str(),
            report.events_in,
            report.errors_total
        ),
        ("RUNNING", 42, 2)
    );
}

#[tokio::test]
async fn a_config_post_with_an_empty_body_is_a_plain_poll() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, CONFIG_V1).await;
    let node = app.enroll("edge-1", &[]).await;
    app.clock.advance_ms(5_000);

    let resp = app.post_config(&node.node_token, "").await;

    assert_eq!(resp.status(), StatusCode::OK);
    let doc: ConfigResponse = resp.json().await.unwrap();
    assert_eq!(doc.pipelines[0].pipeline_id, pipeline.id);
    let view = app.node_view(&node.node_id).await;
    assert_eq!(view.node.last_seen_at, Some(T0 + 5_000));
    assert!(view.pipelines.is_empty(), "no report was sent");
}

/// A node's answers are kept between polls; what it reports on the heartbeat route must
/// still decide its very next plain poll: labels that leave the selector remove the
/// pipeline, and an agent version that goes back is stored as reported.
async fn a_heartbeat_changes_what_the_next_plain_poll_is_served(app: TestApp) {
    let pipeline = app.create_pipeline("edge-logs", &[("tier", "edge")]).await;
    app.deploy(&pipeline.id, CONFIG_V1).await;
    let node = app.enroll("edge-1", &[("tier", "edge")]).await;
    let served = |resp: reqwest::Response| async move {
        assert_eq!(resp.status(), StatusCode::OK);
        let doc: ConfigResponse = resp.json().await.unwrap();
        doc.pipelines.len()
    };
    assert_eq!(
        served(app.get_config(&node.node_token, None).await).await,
        1
    );
    assert_eq!(
        served(app.get_config(&node.node_token, None).await).await,
        1
    );

    let heartbeat = |labels: serde_json::Value, version: &str| {
        json!({"pipelines": [], "labels": labels, "agentVersion": version}).to_string()
    };
    let resp = app
        .post_heartbeat(
            &node.node_token,
            heartbeat(json!({"tier": "core"}), "2.0.0"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        served(app.get_config(&node.node_token, None).await).await,
        0
    );
    assert_eq!(
        app.node_view(&node.node_id)
            .await
            .node
            .agent_version
            .as_deref(),
        Some("2.0.0")
    );

    let resp = app
        .post_heartbeat(
            &node.node_token,
            heartbeat(json!({"tier": "edge"}), "1.0.0"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        served(app.get_config(&node.node_token, None).await).await,
        1
    );
    assert_eq!(
        app.node_view(&node.node_id)
            .await
            .node
            .agent_version
            .as_deref(),
        Some("1.0.0"),
        "a version going back is a change too"
    );
}

#[tokio::test]
async fn a_heartbeat_changes_what_the_next_plain_poll_is_served_on_sqlite() {
    a_heartbeat_changes_what_the_next_plain_poll_is_served(TestApp::spawn().await).await;
}

#[tokio::test]
async fn a_heartbeat_changes_what_the_next_plain_poll_is_served_on_postgres() {
    a_heartbeat_changes_what_the_next_plain_poll_is_served(TestApp::spawn_postgres().await).await;
}
