//! A server process killed with SIGKILL mid-bake loses nothing: the next process on the same
//! SQLite file decides the stage at the deadline stored on the release row, once.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use serde_json::{json, Value};
use vf_control::testing::TestDb;

use crate::fixture::{health_window_stage, wall_clock_ms, Fixture, BAKE_MS};
use crate::server::{assert_audit_chain_ok, ServerProcess};

/// How far in the real future stage 1's deadline is when the release is created: room for
/// two server starts and a kill before it.
const DEADLINE_IN_MS: i64 = 7_000;
/// How long after the deadline the scheduler (ticking every 100 ms) may take to decide.
const DECIDE_WITHIN_MS: i64 = 10_000;

const TICK: &[(&str, &str)] = &[("VF_SCHEDULER_INTERVAL_MS", "100")];

#[tokio::test]
async fn a_server_killed_with_sigkill_mid_bake_resumes_and_decides_the_stage_exactly_once_from_its_stored_deadline(
) {
    let db = TestDb::sqlite();
    let fixture = Fixture::open(&db.url, wall_clock_ms() + DEADLINE_IN_MS - BAKE_MS).await;
    let nodes = [
        fixture.enroll("edge-1").await.node_id,
        fixture.enroll("edge-2").await.node_id,
    ];
    let pipeline = fixture.pipeline_on_v1("logs").await;
    let plan = json!({
        "stages": [health_window_stage(50), health_window_stage(100)],
        "autoAdvance": true,
    });
    let created = fixture.create_release(&pipeline.id, "v: 2\n", plan).await;
    let deadline = created
        .state
        .bake_deadline
        .expect("stage 1 has a bake deadline");
    fixture.close().await;
    let id = created.id.as_str();
    let get = json!({ "release_id": id });

    // The first server runs its scheduler on the release, then dies without any shutdown.
    let mut first = ServerProcess::start("first", &db.url, TICK).await;
    first
        .wait_for_log("scheduler started", Duration::from_secs(5))
        .await;
    let view = first.call("release.canary.get", get.clone()).await;
    assert_baking_stage_1(&view, created.row_version, deadline);
    let status = first.kill().await;
    assert_eq!(status.signal(), Some(9), "the first server died of SIGKILL");
    assert!(
        wall_clock_ms() < deadline,
        "the first server was killed {} ms after the stored deadline: the machine is too slow \
         for this test's {DEADLINE_IN_MS} ms lead",
        wall_clock_ms() - deadline
    );

    let mut second = ServerProcess::start("second", &db.url, TICK).await;

    // Before the stored deadline nothing is decided: every answer received before it shows
    // stage 1 baking, row untouched.
    let mut observed = 0;
    loop {
        let view = second.call("release.canary.get", get.clone()).await;
        if wall_clock_ms() >= deadline {
            break;
        }
        assert_baking_stage_1(&view, created.row_version, deadline);
        observed += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        observed > 0,
        "the second server was ready only after the stored deadline: nothing was observed \
         before it (the machine is too slow for this test's {DEADLINE_IN_MS} ms lead)"
    );
    println!("the restarted server showed stage 1 baking {observed} times before its deadline");

    // After it, stage 2 starts.
    let advanced = loop {
        let view = second.call("release.canary.get", get.clone()).await;
        if view["current_stage"] != 0 {
            break view;
        }
        assert!(
            wall_clock_ms() < deadline + DECIDE_WITHIN_MS,
            "stage 1 was not decided within {DECIDE_WITHIN_MS} ms of its deadline: {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(advanced["status"], "CANARY_DEPLOYED", "{advanced}");
    assert_eq!(advanced["current_stage"], 1, "{advanced}");
    assert_eq!(
        advanced["row_version"],
        created.row_version + 1,
        "one transition: {advanced}"
    );
    let stages = advanced["stages"].as_array().expect("stages");
    assert_eq!(stages.len(), 2, "{advanced}");
    let evaluations = stages[0]["evaluations"].as_array().expect("evaluations");
    assert_eq!(evaluations.len(), 1, "stage 1 evaluated once: {advanced}");
    assert_eq!(evaluations[0]["trigger"], "scheduler");
    assert_eq!(evaluations[0]["decision"], "advance");
    assert!(at_or_after(&evaluations[0]["at"], deadline), "{advanced}");
    assert_eq!(stages[0]["outcome"], "passed");
    let started = stages[1]["started_at"]
        .as_i64()
        .expect("stage 2 started_at");
    assert!(
        started >= deadline,
        "stage 2 started {started} < {deadline}"
    );
    assert_eq!(stages[1]["bake_deadline"], started + BAKE_MS);
    assert_eq!(advanced["bake_deadline"], started + BAKE_MS);
    // 50 % of two nodes, then the other one.
    let mut targeted: Vec<Value> = Vec::new();
    for stage in 1..=2 {
        let page = second
            .call(
                "release.stage.nodes",
                json!({ "release_id": id, "stage": stage }),
            )
            .await;
        targeted.extend(page["node_ids"].as_array().expect("node_ids").clone());
    }
    assert_eq!(stages[0]["node_count"], 1);
    targeted.sort_by_key(|v| v.as_str().map(str::to_string));
    let mut expected = nodes.to_vec();
    expected.sort();
    assert_eq!(targeted, expected);

    // More ticks change nothing (stage 2 bakes for 30 s).
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let view = second.call("release.canary.get", get.clone()).await;
        assert_eq!(view["row_version"], created.row_version + 1, "{view}");
    }
    second.stop().await;

    // Exactly one decision, made by the second process; one audit event for it.
    let decisions = |server: &ServerProcess| -> Vec<String> {
        server
            .events("scheduler decided")
            .iter()
            .filter(|e| e["release_id"] == id)
            .map(|e| e["decision"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(decisions(&first), Vec::<String>::new());
    assert_eq!(decisions(&second), ["advance"]);
    let fixture = Fixture::reopen(&db.url).await;
    let mut log = vf_control::testing::audit_for_target(&fixture.control.db, "release", id, 50)
        .await
        .unwrap();
    log.reverse();
    let actions: Vec<&str> = log.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["release.create", "release.advance"]);
    assert_eq!(log[1].actor, "scheduler");
    assert!(
        log[1].at >= deadline,
        "audited at {} < {deadline}",
        log[1].at
    );
    let stored = fixture.release(id).await;
    assert_eq!(stored.row_version, created.row_version + 1);
    fixture.close().await;

    assert_audit_chain_ok(&db.url);
}

/// Stage 1 is still baking towards `deadline` and the row is as created.
fn assert_baking_stage_1(view: &Value, row_version: i64, deadline: i64) {
    assert_eq!(
        (
            &view["status"],
            &view["current_stage"],
            &view["row_version"],
            &view["bake_deadline"]
        ),
        (
            &json!("CANARY_DEPLOYED"),
            &json!(0),
            &json!(row_version),
            &json!(deadline)
        ),
        "decided before the stored deadline {deadline} (now {}): {view}",
        wall_clock_ms()
    );
    assert_eq!(view["stages"][0]["evaluations"], json!([]), "{view}");
}

fn at_or_after(value: &Value, deadline: i64) -> bool {
    value.as_i64().is_some_and(|at| at >= deadline)
}
