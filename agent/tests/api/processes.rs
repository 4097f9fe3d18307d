use std::time::Duration;

use vf_agent::{Agent, AgentOptions, PipelineStatus};

use crate::fake_server::{pipeline, FakeServer};

const LONG_RUNNING: &str = "sh -c 'sleep 30' # {config}";

fn with_command(server: &FakeServer, dir: &tempfile::TempDir, command: &str) -> AgentOptions {
    AgentOptions {
        command: Some(command.to_string()),
        ..server.options(dir.path())
    }
}

/// Alive and not a zombie, per /proc.
fn process_alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn command_template_runs_and_its_pid_is_reported() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(with_command(&server, &dir, LONG_RUNNING))
        .await
        .unwrap();
    server.serve(vec![pipeline("p1", 1, "a: 1\n")]);

    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();

    let report = server.last_report(agent.node_id(), "p1");
    assert_eq!(report.status, "RUNNING");
    let pid = report.pid.expect("a running command reports its pid");
    assert!(process_alive(pid));
    assert!(report.uptime_seconds.is_some());
    assert_eq!(report.events_in, None);
    agent.stop_all().await;
    assert!(!process_alive(pid));
}

#[tokio::test]
async fn crashing_command_is_reported_crashed_with_its_exit_code() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let command = "sh -c 'echo boom >&2; exit 3' # {config}";
    let mut agent = Agent::start(with_command(&server, &dir, command))
        .await
        .unwrap();
    server.serve(vec![pipeline("p1", 1, "a: 1\n")]);
    agent.poll_once().await.unwrap();

    let exited = agent.wait_for_exit("p1", Duration::from_secs(10)).await;
    agent.poll_once().await.unwrap();

    assert_eq!(exited.unwrap().status, PipelineStatus::Crashed);
    let report = server.last_report(agent.node_id(), "p1");
    assert_eq!(report.status, "CRASHED");
    assert_eq!(report.pid, None);
    let logs = report.recent_logs.unwrap();
    assert!(
        logs.iter().any(|line| line.contains("exited with code 3")),
        "{logs:?}"
    );
}

#[tokio::test]
async fn crashed_command_is_restarted_by_the_next_config_change() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let command = "test \"$(cat {config})\" = 'ok: 2' && sleep 30 || exit 3";
    let mut agent = Agent::start(with_command(&server, &dir, command))
        .await
        .unwrap();
    server.serve(vec![pipeline("p1", 1, "ok: 1")]);
    agent.poll_once().await.unwrap();
    agent
        .wait_for_exit("p1", Duration::from_secs(10))
        .await
        .unwrap();

    server.serve(vec![pipeline("p1", 2, "ok: 2")]);
    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();

    let report = server.last_report(agent.node_id(), "p1");
    assert_eq!((report.version, report.status.as_str()), (2, "RUNNING"));
    agent.stop_all().await;
}

#[tokio::test]
async fn pipeline_no_longer_served_has_its_process_stopped() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(with_command(&server, &dir, LONG_RUNNING))
        .await
        .unwrap();
    server.serve(vec![pipeline("p1", 1, "a: 1\n")]);
    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();
    let pid = server.last_report(agent.node_id(), "p1").pid.unwrap();

    server.serve(vec![]);
    agent.poll_once().await.unwrap();

    assert!(!process_alive(pid));
    assert!(agent.running().is_empty());
}

#[tokio::test]
async fn new_version_restarts_the_command_with_a_new_process() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(with_command(&server, &dir, LONG_RUNNING))
        .await
        .unwrap();
    server.serve(vec![pipeline("p1", 1, "a: 1\n")]);
    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();
    let old_pid = server.last_report(agent.node_id(), "p1").pid.unwrap();

    server.serve(vec![pipeline("p1", 2, "a: 2\n")]);
    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();

    let report = server.last_report(agent.node_id(), "p1");
    assert_eq!(report.version, 2);
    assert_ne!(report.pid.unwrap(), old_pid);
    assert!(!process_alive(old_pid));
    agent.stop_all().await;
}

#[tokio::test]
async fn run_loop_stops_pipeline_processes_on_shutdown() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut options = with_command(&server, &dir, LONG_RUNNING);
    options.poll_interval_override = Some(Duration::from_millis(10));
    server.serve(vec![pipeline("p1", 1, "a: 1\n")]);
    let agent = Agent::start(options).await.unwrap();
    let node_id = agent.node_id().to_string();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(agent.run(async {
        let _ = stop_rx.await;
    }));

    server.wait_for_polls(2).await;
    let pid = server.last_report(&node_id, "p1").pid.unwrap();
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .unwrap()
        .unwrap();

    assert!(!process_alive(pid));
}
