use vf_agent::{Agent, PipelineStatus, PollOutcome};

use crate::fake_server::{pipeline, FakeServer};

const YAML_V1: &str = "sources:\n  in: {type: demo_logs}\n";
const YAML_V2: &str = "sources:\n  in: {type: demo_logs, interval: 2}\n";

async fn agent(server: &FakeServer, dir: &tempfile::TempDir) -> Agent {
    Agent::start(server.options(dir.path())).await.unwrap()
}

#[tokio::test]
async fn served_pipeline_is_written_to_disk_and_reported_running_with_its_version() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = agent(&server, &dir).await;
    server.serve(vec![pipeline("p1", 3, YAML_V1)]);

    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();

    let file = dir.path().join("pipelines/p1.yaml");
    assert_eq!(std::fs::read_to_string(file).unwrap(), YAML_V1);
    let running = agent.running();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].version, 3);
    assert_eq!(running[0].status, PipelineStatus::Running);
    let report = server.last_report(agent.node_id(), "p1");
    assert_eq!((report.version, report.status.as_str()), (3, "RUNNING"));
    assert_eq!(
        report.config_checksum.as_deref(),
        Some(pipeline("p1", 3, YAML_V1).checksum.as_str())
    );
}

#[tokio::test]
async fn pipeline_absent_from_the_next_response_is_stopped_and_its_file_removed() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = agent(&server, &dir).await;
    server.serve(vec![pipeline("p1", 1, YAML_V1), pipeline("p2", 1, YAML_V1)]);
    agent.poll_once().await.unwrap();

    server.serve(vec![pipeline("p2", 1, YAML_V1)]);
    let outcome = agent.poll_once().await.unwrap();

    let PollOutcome::Applied(summary) = outcome else {
        panic!("expected a new config, got {outcome:?}");
    };
    assert_eq!(summary.stopped, ["p1"]);
    assert!(!dir.path().join("pipelines/p1.yaml").exists());
    assert!(dir.path().join("pipelines/p2.yaml").exists());
    let ids: Vec<_> = agent.running().into_iter().map(|p| p.pipeline_id).collect();
    assert_eq!(ids, ["p2"]);
    agent.poll_once().await.unwrap();
    assert_eq!(server.last_report(agent.node_id(), "p1").status, "STOPPED");
}

#[tokio::test]
async fn not_modified_answer_keeps_the_running_pipelines() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = agent(&server, &dir).await;
    server.serve(vec![pipeline("p1", 1, YAML_V1)]);
    agent.poll_once().await.unwrap();

    let outcome = agent.poll_once().await.unwrap();

    assert_eq!(outcome, PollOutcome::NotModified);
    assert_eq!(server.config_statuses(), [200, 304]);
    assert_eq!(agent.running()[0].status, PipelineStatus::Running);
    assert!(dir.path().join("pipelines/p1.yaml").exists());
    assert_eq!(agent.last_config().unwrap().pipelines.len(), 1);
}

#[tokio::test]
async fn new_version_replaces_the_file_and_is_reported() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = agent(&server, &dir).await;
    server.serve(vec![pipeline("p1", 1, YAML_V1)]);
    agent.poll_once().await.unwrap();

    server.serve(vec![pipeline("p1", 2, YAML_V2)]);
    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();

    let file = dir.path().join("pipelines/p1.yaml");
    assert_eq!(std::fs::read_to_string(file).unwrap(), YAML_V2);
    assert_eq!(server.last_report(agent.node_id(), "p1").version, 2);
}

#[tokio::test]
async fn config_with_a_wrong_checksum_is_not_applied_and_reported_crashed() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = agent(&server, &dir).await;
    let mut corrupted = pipeline("p1", 1, YAML_V1);
    corrupted.config_yaml.push_str("# tampered\n");
    server.serve(vec![corrupted]);

    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();

    assert!(!dir.path().join("pipelines/p1.yaml").exists());
    assert_eq!(agent.running()[0].status, PipelineStatus::Crashed);
    let report = server.last_report(agent.node_id(), "p1");
    assert_eq!(report.status, "CRASHED");
    assert!(report.recent_logs.unwrap()[0].contains("checksum mismatch"));
}

#[tokio::test]
async fn bad_checksum_on_a_new_version_leaves_the_previous_version_running() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = agent(&server, &dir).await;
    server.serve(vec![pipeline("p1", 1, YAML_V1)]);
    agent.poll_once().await.unwrap();
    let mut corrupted = pipeline("p1", 2, YAML_V2);
    corrupted.checksum = pipeline("x", 2, "other").checksum;
    server.serve(vec![corrupted]);
    agent.poll_once().await.unwrap();
    assert_eq!(agent.running()[0].status, PipelineStatus::Crashed);

    server.serve(vec![pipeline("p1", 1, YAML_V1)]);
    agent.poll_once().await.unwrap();

    let file = dir.path().join("pipelines/p1.yaml");
    assert_eq!(std::fs::read_to_string(file).unwrap(), YAML_V1);
    let running = &agent.running()[0];
    assert_eq!(
        (running.version, running.status),
        (1, PipelineStatus::Running)
    );
}

#[tokio::test]
async fn config_files_left_by_an_earlier_run_are_removed_when_not_served() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pipelines")).unwrap();
    std::fs::write(dir.path().join("pipelines/old.yaml"), "x").unwrap();
    let mut agent = agent(&server, &dir).await;
    server.serve(vec![pipeline("p1", 1, YAML_V1)]);

    agent.poll_once().await.unwrap();

    assert!(!dir.path().join("pipelines/old.yaml").exists());
    assert!(dir.path().join("pipelines/p1.yaml").exists());
}
