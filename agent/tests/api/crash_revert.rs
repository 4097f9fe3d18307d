//! A new config version whose process keeps crashing is given up on: the running agent goes
//! back to the last version that ran healthily and reports the failed one.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use tokio::{sync::oneshot, task::JoinHandle};
use vf_agent::{Agent, AgentOptions, CrashPolicy};
use vf_protocol::{FailedVersion, PipelineReport};

use crate::fake_server::{pipeline, FakeServer};

const GOOD_V1: &str = "ok: 1\n";
const BAD_V2: &str = "ok: 2\ncrash: true\n";
const GOOD_V3: &str = "ok: 3\n";
const DEADLINE: Duration = Duration::from_secs(20);

/// A config containing `crash: true` logs its start to `<data>/bad-starts`, prints an error
/// and exits 1 at once; any other config stays up.
fn options(server: &FakeServer, data_dir: &Path) -> AgentOptions {
    let starts = bad_starts_file(data_dir);
    let command = format!(
        "if grep -q 'crash: true' {{config}}; then echo start >> {}; \
         echo 'error: sink out is unreachable' >&2; exit 1; fi; exec sleep 30",
        starts.display()
    );
    AgentOptions {
        command: Some(command),
        poll_interval_override: Some(Duration::from_millis(50)),
        crash_policy: CrashPolicy {
            limit: 3,
            window: Duration::from_secs(60),
            healthy_after: Duration::from_secs(1),
            restart_delay: Duration::from_millis(100),
        },
        ..server.options(data_dir)
    }
}

fn bad_starts_file(data_dir: &Path) -> PathBuf {
    data_dir.join("bad-starts")
}

/// How many times a crashing config was started.
fn bad_starts(data_dir: &Path) -> usize {
    std::fs::read_to_string(bad_starts_file(data_dir))
        .map(|log| log.lines().count())
        .unwrap_or(0)
}

struct Running {
    node_id: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<vf_agent::Exit>,
}

async fn run(options: AgentOptions) -> Running {
    let agent = Agent::start(options).await.unwrap();
    let node_id = agent.node_id().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(agent.run(async {
        let _ = stopped.await;
    }));
    Running {
        node_id,
        stop,
        task,
    }
}

async fn shut_down(running: Running) {
    running.stop.send(()).unwrap();
    tokio::time::timeout(DEADLINE, running.task)
        .await
        .unwrap()
        .unwrap();
}

/// Polls until `check` holds, failing with `what` after the deadline.
async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The node's latest report for `pipeline_id`, once it satisfies `check`.
async fn report_where(
    server: &FakeServer,
    node_id: &str,
    pipeline_id: &str,
    what: &str,
    check: impl Fn(&PipelineReport) -> bool,
) -> PipelineReport {
    eventually(what, || {
        let heartbeats = server.heartbeats(node_id);
        let latest = heartbeats
            .iter()
            .rev()
            .flat_map(|h| h.pipelines.iter())
            .find(|p| p.pipeline_id == pipeline_id)?;
        check(latest).then(|| latest.clone())
    })
    .await
}

/// Waits for the agent to store `version` as the pipeline's last good config.
async fn healthy(data_dir: &Path, version: i64) {
    let file = data_dir.join("last-good/p1.json");
    eventually("the version to be recorded as healthy", || {
        let stored: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).ok()?).ok()?;
        (stored["version"] == version).then_some(())
    })
    .await;
}

/// Lets the agent poll `n` more times.
async fn more_polls(server: &FakeServer, n: usize) {
    server
        .wait_for_polls(server.config_statuses().len() + n)
        .await;
}

fn assert_failed_v2_reason(failed: &FailedVersion) {
    assert_eq!((failed.version, failed.status.as_str()), (2, "CRASHED"));
    for part in [
        "exited 3 times within 60 s",
        "last exit: code 1",
        "error: sink out is unreachable",
    ] {
        assert!(
            failed.reason.contains(part),
            "{part:?} in {:?}",
            failed.reason
        );
    }
    assert!(failed.reason.len() < 500);
}

#[tokio::test]
async fn crashing_version_is_reverted_to_the_last_healthy_one_until_another_is_served() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    server.serve(vec![pipeline("p1", 1, GOOD_V1)]);
    let agent = run(options(&server, dir.path())).await;
    let node = agent.node_id.as_str();
    healthy(dir.path(), 1).await;

    server.serve(vec![pipeline("p1", 2, BAD_V2)]);
    let reverted = report_where(&server, node, "p1", "the revert to v1", |r| {
        r.failed_version.is_some()
    })
    .await;

    assert_eq!((reverted.version, reverted.status.as_str()), (1, "RUNNING"));
    assert!(reverted.pid.is_some());
    assert_failed_v2_reason(&reverted.failed_version.unwrap());
    assert_eq!(bad_starts(dir.path()), 3);

    // A new answer that still serves v2 (another pipeline was added) does not retry it.
    server.serve(vec![pipeline("p1", 2, BAD_V2), pipeline("p2", 1, GOOD_V1)]);
    report_where(&server, node, "p2", "p2 to run", |r| r.status == "RUNNING").await;
    more_polls(&server, 5).await;
    let held = server.last_report(node, "p1");
    assert_eq!((held.version, held.status.as_str()), (1, "RUNNING"));
    assert_failed_v2_reason(&held.failed_version.unwrap());
    assert_eq!(bad_starts(dir.path()), 3);

    server.serve(vec![pipeline("p1", 3, GOOD_V3), pipeline("p2", 1, GOOD_V1)]);
    let fixed = report_where(&server, node, "p1", "v3 to run", |r| r.version == 3).await;
    assert_eq!(fixed.status, "RUNNING");
    assert_eq!(fixed.failed_version, None);
    let file = dir.path().join("pipelines/p1.yaml");
    assert_eq!(std::fs::read_to_string(file).unwrap(), GOOD_V3);
    shut_down(agent).await;
}

#[tokio::test]
async fn crashing_first_deploy_is_stopped_and_reported_crashed() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    server.serve(vec![pipeline("p1", 2, BAD_V2)]);
    let agent = run(options(&server, dir.path())).await;
    let node = agent.node_id.as_str();

    let given_up = report_where(&server, node, "p1", "the agent to give up", |r| {
        r.failed_version.is_some()
    })
    .await;
    more_polls(&server, 5).await;

    assert_eq!((given_up.version, given_up.status.as_str()), (2, "CRASHED"));
    assert_eq!(given_up.pid, None);
    assert_failed_v2_reason(&given_up.failed_version.unwrap());
    assert_eq!(server.last_report(node, "p1").status, "CRASHED");
    assert_eq!(bad_starts(dir.path()), 3);

    server.serve(vec![pipeline("p1", 3, GOOD_V3)]);
    let fixed = report_where(&server, node, "p1", "v3 to run", |r| r.version == 3).await;
    assert_eq!(fixed.status, "RUNNING");
    assert_eq!(fixed.failed_version, None);
    shut_down(agent).await;
}

#[tokio::test]
async fn last_healthy_config_survives_a_restart_of_the_agent() {
    let server = FakeServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    server.serve(vec![pipeline("p1", 1, GOOD_V1)]);
    let first = run(options(&server, dir.path())).await;
    healthy(dir.path(), 1).await;
    shut_down(first).await;

    server.serve(vec![pipeline("p1", 2, BAD_V2)]);
    let second = run(options(&server, dir.path())).await;
    let reverted = report_where(&server, &second.node_id, "p1", "the revert to v1", |r| {
        r.failed_version.is_some()
    })
    .await;

    assert_eq!((reverted.version, reverted.status.as_str()), (1, "RUNNING"));
    assert_failed_v2_reason(&reverted.failed_version.unwrap());
    shut_down(second).await;
}
