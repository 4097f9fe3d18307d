//! vfctl against a real server process, as a CI job runs it: `deploy --wait` exits 0 when
//! the plan's stages pass and 1 when a gate rolls the release back; a plan the server would
//! refuse is refused by `plan validate` offline with the server's own words.

use std::path::{Path, PathBuf};

use serde_json::json;
use vf_control::testing::TestDb;

use crate::fixture::{wall_clock_ms, Fixture, API_TOKEN};
use crate::server::ServerProcess;

/// What one vfctl run printed and returned.
struct Ran {
    code: i32,
    out: String,
    err: String,
}

async fn run_vfctl(args: &[&str]) -> Ran {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = std::iter::once("vfctl").chain(args.iter().copied());
    let code = ::vfctl::run(
        argv,
        &mut ::vfctl::Io {
            out: &mut out,
            err: &mut err,
            tty: false,
        },
    )
    .await;
    Ran {
        code,
        out: String::from_utf8_lossy(&out).into_owned(),
        err: String::from_utf8_lossy(&err).into_owned(),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// One stage on every node, baking 30 s (the shortest bake), with `gates`.
fn plan(gates: &str) -> String {
    format!(
        "# vfctl test plan\nstages:\n  - selector: {{percentage: 100}}\n    bakeSeconds: 30\n    gates: {gates}\nminAppliedPercent: 0\n"
    )
}

#[tokio::test]
async fn deploy_wait_exits_0_when_the_plan_passes_and_1_when_it_rolls_back() {
    let db = TestDb::postgres().await;
    let fixture = Fixture::open(&db.url, wall_clock_ms()).await;
    fixture.enroll("edge-1").await;
    let passing = fixture.pipeline_on_v1("passing").await;
    let failing = fixture.pipeline_on_v1("failing").await;
    let server =
        ServerProcess::start("server", &db.url, &[("VF_SCHEDULER_INTERVAL_MS", "200")]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "pipeline.yaml",
        "sources:\n  in: {type: stdin}\n",
    );
    let good = write(dir.path(), "good.yaml", &plan("[{healthWindow: {}}]"));
    // An error-rate gate on a canary that served no traffic fails closed: rolled back.
    let bad = write(
        dir.path(),
        "bad.json",
        &serde_json::to_string(&json!({
            "stages": [{"selector": {"percentage": 100}, "bakeSeconds": 30,
                        "gates": [{"errorRate": {"maxPercent": 5}}]}],
            "minAppliedPercent": 0,
        }))
        .unwrap(),
    );
    let deploy = |pipeline: String, plan: PathBuf| {
        let server = server.url.clone();
        let config = config.clone();
        async move {
            let args = [
                "--server",
                &server,
                "--token",
                API_TOKEN,
                "deploy",
                &pipeline,
                "--config",
                config.to_str().unwrap(),
                "--plan",
                plan.to_str().unwrap(),
                "--reason",
                "CI run 42",
                "--wait",
                "--poll-ms",
                "300",
            ];
            run_vfctl(&args).await
        }
    };
    // By name and by id, both at once.
    let (ok, rolled) = tokio::join!(
        deploy("passing".into(), good),
        deploy(failing.id.clone(), bad),
    );
    assert_eq!(ok.code, 0, "complete: {}{}", ok.out, ok.err);
    assert!(
        ok.err.contains("complete: every node runs v2"),
        "{}",
        ok.err
    );
    assert!(ok.out.contains("BROADENED"), "{}", ok.out);
    assert_eq!(rolled.code, 1, "rolled back: {}{}", rolled.out, rolled.err);
    assert!(rolled.err.contains("rolled back: "), "{}", rolled.err);
    assert!(rolled.err.contains("errorRate"), "{}", rolled.err);

    // The passing release's changelog is the reason given; the pipeline is listed as JSON.
    let listed = run_vfctl(&[
        "--server",
        &server.url,
        "--token",
        API_TOKEN,
        "--output",
        "json",
        "pipelines",
        "list",
    ])
    .await;
    assert_eq!(listed.code, 0, "{}", listed.err);
    let rows: serde_json::Value = serde_json::from_str(&listed.out).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == passing.id)
        .unwrap();
    assert_eq!(row["deployed_version"], 2);
    let detail = server.call("pipeline.get", json!({"id": passing.id})).await;
    let v2 = detail["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["version"] == 2)
        .unwrap();
    assert_eq!(v2["changelog"], "CI run 42");

    // An error names what went wrong and exits 3.
    let missing = run_vfctl(&[
        "--server",
        &server.url,
        "--token",
        API_TOKEN,
        "release",
        "status",
        "no-such-release",
    ])
    .await;
    assert_eq!(missing.code, 3);
    assert!(missing.err.contains("404"), "{}", missing.err);
}

#[tokio::test]
async fn plan_validate_refuses_offline_with_the_servers_words() {
    let db = TestDb::postgres().await;
    let fixture = Fixture::open(&db.url, wall_clock_ms()).await;
    let pipeline = fixture.pipeline_on_v1("logs").await;
    let server = ServerProcess::start("server", &db.url, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    for (gates, bake) in [("[{errorRate: {maxPercent: 500}}]", 30), ("[]", 5)] {
        let text = plan(gates).replace("bakeSeconds: 30", &format!("bakeSeconds: {bake}"));
        let file = write(dir.path(), "plan.yaml", &text);
        let offline = run_vfctl(&["plan", "validate", file.to_str().unwrap()]).await;
        assert_eq!(offline.code, 3, "{}", offline.out);
        let value = vf_rules::config::yaml_to_json(&text).unwrap();
        let resp = reqwest::Client::new()
            .post(format!("{}/api/release.canary.create", server.url))
            .bearer_auth(API_TOKEN)
            .json(&json!({"pipeline_id": pipeline.id, "config_yaml": "v: 2\n", "rollout_plan": value}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        let server_says = resp.text().await.unwrap();
        let server_says = server_says.trim_start_matches("ServerError|");
        assert!(
            offline.err.contains(server_says),
            "vfctl: {} / server: {server_says}",
            offline.err
        );
    }
    let good = write(dir.path(), "good.yaml", &plan("[{healthWindow: {}}]"));
    let valid = run_vfctl(&["plan", "validate", good.to_str().unwrap()]).await;
    assert_eq!(valid.code, 0, "{}", valid.err);
    assert!(valid.out.contains("valid, 1 stages"), "{}", valid.out);
}
