use vf_agent::{Agent, AgentError};

use crate::fake_server::FakeServer;

#[tokio::test]
async fn enrollment_persists_the_identity_and_a_restart_reuses_it() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();

    let first = Agent::start(server.options(dir.path())).await.unwrap();
    let node_id = first.node_id().to_string();
    drop(first);
    let again = Agent::start(server.options(dir.path())).await.unwrap();

    assert_eq!(again.node_id(), node_id);
    assert_eq!(server.enrollments().len(), 1);
    let stored = std::fs::read_to_string(dir.path().join("identity.json")).unwrap();
    let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["nodeId"], node_id);
    assert_eq!(stored["environmentId"], "env-1");
    assert!(stored["nodeToken"].as_str().is_some_and(|t| !t.is_empty()));
}

#[cfg(unix)]
#[tokio::test]
async fn stored_identity_is_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    Agent::start(server.options(dir.path())).await.unwrap();
    let mode = std::fs::metadata(dir.path().join("identity.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn enrollment_reports_hostname_labels_and_agent_version() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    Agent::start(server.options(dir.path())).await.unwrap();

    let request = &server.enrollments()[0];
    assert_eq!(request.hostname, "node-a");
    assert_eq!(request.labels.as_ref().unwrap()["region"], "eu");
    assert!(request.agent_version.is_some());
}

#[tokio::test]
async fn bad_enrollment_token_is_refused_and_nothing_is_stored() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut options = server.options(dir.path());
    options.enrollment_token = "wrong".to_string();

    let result = Agent::start(options).await;

    assert!(matches!(result, Err(AgentError::EnrollmentRejected)));
    assert!(!dir.path().join("identity.json").exists());
}

#[tokio::test]
async fn starting_without_identity_or_enrollment_token_fails_with_a_clear_error() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut options = server.options(dir.path());
    options.enrollment_token.clear();

    let error = Agent::start(options).await.unwrap_err();

    assert!(matches!(error, AgentError::MissingEnrollmentToken(_)));
    assert!(error.to_string().contains("--token"));
    assert!(server.enrollments().is_empty());
}
