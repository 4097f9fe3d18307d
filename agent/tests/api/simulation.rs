use std::collections::BTreeMap;

use vf_agent::{SimSettings, SimulationOptions, Simulator};

use crate::fake_server::{pipeline, FakeServer};

const GOOD: &str = "sources:\n  in: {type: demo_logs}\n";
const BAD_CANARY: &str = "sources:\n  in: {type: demo_logs}\n# vf-simulate: error_rate=0.25\n";

async fn fleet(server: &FakeServer, dir: &tempfile::TempDir, nodes: usize) -> Simulator {
    let mut base = server.options(dir.path());
    base.labels = BTreeMap::from([
        ("rollout-wave".to_string(), "a".to_string()),
        ("zone".to_string(), "z{i%3}".to_string()),
    ]);
    let simulation = SimulationOptions {
        nodes,
        hostname_template: "sim-{i}".to_string(),
        settings: SimSettings::default(),
    };
    Simulator::start(base, simulation).await.unwrap()
}

#[tokio::test]
async fn simulated_nodes_enroll_with_templated_hostnames_labels_and_data_dirs() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();

    let simulator = fleet(&server, &dir, 4).await;

    assert_eq!(simulator.agents().len(), 4);
    let mut enrolled: Vec<_> = server
        .enrollments()
        .into_iter()
        .map(|r| (r.hostname, r.labels.unwrap()["zone"].clone()))
        .collect();
    enrolled.sort();
    assert_eq!(
        enrolled,
        [
            ("sim-0", "z0"),
            ("sim-1", "z1"),
            ("sim-2", "z2"),
            ("sim-3", "z0")
        ]
        .map(|(h, z)| (h.to_string(), z.to_string()))
    );
    for i in 0..4 {
        assert!(dir.path().join(format!("sim-{i}/identity.json")).exists());
    }
}

#[tokio::test]
async fn error_directive_makes_only_the_nodes_running_that_config_report_errors() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut simulator = fleet(&server, &dir, 3).await;
    server.serve(vec![pipeline("p1", 1, GOOD)]);
    let canary = simulator.agents()[0].node_id().to_string();
    server.serve_to(&canary, vec![pipeline("p1", 2, BAD_CANARY)]);

    for result in simulator.poll_all_once().await {
        result.unwrap();
    }
    for result in simulator.poll_all_once().await {
        result.unwrap();
    }

    for agent in simulator.agents() {
        let report = server.last_report(agent.node_id(), "p1");
        assert_eq!(report.events_in, Some(100.into()));
        let expected_errors = if agent.node_id() == canary { 25 } else { 0 };
        assert_eq!(
            report.errors_total,
            Some(expected_errors.into()),
            "{}",
            agent.hostname()
        );
    }
}

#[tokio::test]
async fn simulated_counters_accumulate_and_restart_from_zero_on_a_new_version() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut simulator = fleet(&server, &dir, 1).await;
    let node = simulator.agents()[0].node_id().to_string();
    server.serve(vec![pipeline("p1", 1, GOOD)]);
    for _ in 0..4 {
        simulator.poll_all_once().await;
    }
    assert_eq!(server.last_report(&node, "p1").events_in, Some(300.into()));

    server.serve(vec![pipeline("p1", 2, BAD_CANARY)]);
    simulator.poll_all_once().await;
    simulator.poll_all_once().await;

    let report = server.last_report(&node, "p1");
    assert_eq!(report.version, 2);
    assert_eq!(report.events_in, Some(100.into()));
    assert_eq!(report.errors_total, Some(25.into()));
    assert_eq!(
        report.bytes_out,
        Some((100 * vf_agent::BYTES_PER_EVENT).into())
    );
}
