//! `fleet.nodes` answers one page of the environment's nodes, filtered, with counts of all.

use serde_json::{json, Value};

use crate::helpers::TestApp;

fn names(page: &Value) -> Vec<&str> {
    page["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().or(n["node_name"].as_str()).unwrap())
        .collect()
}

#[tokio::test]
async fn the_fleet_is_listed_a_page_at_a_time_filtered_by_name_label_and_status() {
    let app = TestApp::spawn().await;
    for i in 0..12 {
        let zone = if i % 3 == 0 { "eu" } else { "us" };
        let node = app.enroll(&format!("edge-{i:02}"), &[("zone", zone)]).await;
        if i < 10 {
            // Polled: HEALTHY. The last two never polled: UNKNOWN.
            app.get_config(&node.node_token, None).await;
        }
    }
    let env = app.env_id.clone();

    let first = app
        .call_ok("fleet.nodes", json!({ "environment_id": env, "limit": 5 }))
        .await;
    assert_eq!(first["total"], 12);
    assert_eq!(first["matched"], 12);
    assert_eq!(
        names(&first),
        ["edge-00", "edge-01", "edge-02", "edge-03", "edge-04"]
    );
    assert_eq!(
        first["by_status"],
        json!([
            ["HEALTHY", 10],
            ["DEGRADED", 0],
            ["UNREACHABLE", 0],
            ["UNKNOWN", 2]
        ])
    );
    let last = app
        .call_ok(
            "fleet.nodes",
            json!({ "environment_id": env, "offset": 10, "limit": 5 }),
        )
        .await;
    assert_eq!(names(&last), ["edge-10", "edge-11"]);

    let eu_healthy = app
        .call_ok(
            "fleet.nodes",
            json!({ "environment_id": env, "label": "zone=eu", "status": "HEALTHY" }),
        )
        .await;
    assert_eq!(
        names(&eu_healthy),
        ["edge-00", "edge-03", "edge-06", "edge-09"]
    );
    assert_eq!(eu_healthy["matched"], 4);
    assert_eq!(eu_healthy["total"], 12);
    let by_name = app
        .call_ok(
            "fleet.nodes",
            json!({ "environment_id": env, "name": "EDGE-1" }),
        )
        .await;
    assert_eq!(names(&by_name), ["edge-10", "edge-11"]);
}

#[tokio::test]
async fn a_bad_page_or_filter_is_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    let env = app.env_id.clone();
    let message = app
        .call_refused(
            "fleet.nodes",
            json!({ "environment_id": env, "limit": 100000 }),
            400,
        )
        .await;
    assert!(message.starts_with("limit:"), "{message}");
    let message = app
        .call_refused(
            "fleet.nodes",
            json!({ "environment_id": env, "label": "=eu" }),
            400,
        )
        .await;
    assert!(message.starts_with("label:"), "{message}");
}

/// The pipeline page's data counts nodes instead of listing them: the release fleet, each
/// stage and the nodes not targeted yet; `pipeline.nodes` pages through them by stage, and
/// `pipeline.get` brings the same page along when asked (the page's one call).
#[tokio::test]
async fn the_pipeline_view_counts_its_nodes_and_pages_them_by_stage() {
    let app = TestApp::spawn().await;
    let mut tokens = std::collections::HashMap::new();
    for (name, wave) in [
        ("a-1", "a"),
        ("a-2", "a"),
        ("b-1", "b"),
        ("b-2", "b"),
        ("b-3", "b"),
    ] {
        let enrolled = app.enroll(name, &[("wave", wave), ("tier", "edge")]).await;
        tokens.insert(name, enrolled.node_token);
    }
    app.enroll("db-1", &[("tier", "db")]).await;
    let p = app.create_pipeline("logs", &[("tier", "edge")]).await;
    app.deploy(&p.id, "v: 1\n").await;
    let stage = |selector: Value| json!({"selector": selector, "bakeSeconds": 60, "gates": []});
    app.create_release(json!({
        "pipeline_id": p.id,
        "config_yaml": "v: 2\n",
        "rollout_plan": {"stages": [stage(json!({"labels": {"wave": "a"}})), stage(json!({"percentage": 100}))]},
    }))
    .await;

    let detail = app.call_ok("pipeline.get", json!({"id": p.id})).await;
    assert!(
        detail["nodes"].is_null(),
        "no node list unless asked: {detail}"
    );
    assert_eq!(detail["admitted"]["total"], 5);
    assert_eq!(detail["excluded"], 1);
    assert_eq!(detail["release"]["stages"][0]["counts"]["total"], 2);
    assert_eq!(detail["waiting"]["count"], 3);
    assert_eq!(detail["waiting"]["sample"][0][1], "b-1");
    assert_eq!(detail["waiting"]["sample"][0][2], 1);
    assert!(
        detail["waiting"]["sample"][0][0].is_string(),
        "with its id, to link its page"
    );
    assert_eq!(
        detail["canary_logs"],
        json!([]),
        "no canary logged anything yet"
    );

    // Canary nodes' logs, the node with errors first and its error lines first; a node not
    // targeted yet is not a canary.
    for (name, lines) in [
        ("a-1", json!(["v2 started"])),
        (
            "a-2",
            json!([
                "v2 started",
                "ERROR sink out: connection refused",
                "retrying"
            ]),
        ),
        ("b-1", json!(["ERROR not a canary"])),
    ] {
        let resp = app
            .client
            .post(format!("{}/api/agent/logs", app.url))
            .bearer_auth(&tokens[name])
            .json(&json!([{"pipelineId": p.id, "lines": lines}]))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    let detail = app.call_ok("pipeline.get", json!({"id": p.id})).await;
    let logs = detail["canary_logs"].as_array().unwrap();
    let named: Vec<&str> = logs
        .iter()
        .map(|l| l["node_name"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["a-2", "a-1"]);
    assert_eq!(logs[0]["errors"], 1);
    assert_eq!(logs[0]["stage"], 1);
    let lines: Vec<&str> = logs[0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[1].as_str().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "ERROR sink out: connection refused",
            "v2 started",
            "retrying"
        ]
    );

    let nodes = |body: Value| {
        let mut body = body;
        body["pipeline_id"] = json!(p.id);
        app.call_ok("pipeline.nodes", body)
    };
    let all = nodes(json!({})).await;
    assert_eq!(
        (all["total"].clone(), all["matched"].clone()),
        (json!(5), json!(5))
    );
    assert_eq!(names(&all), ["a-1", "a-2", "b-1", "b-2", "b-3"]);
    assert_eq!(names(&nodes(json!({"stage": "1"})).await), ["a-1", "a-2"]);
    assert_eq!(
        names(&nodes(json!({"stage": "none", "limit": 2})).await),
        ["b-1", "b-2"]
    );
    let page = nodes(json!({"stage": "none", "offset": 2})).await;
    assert_eq!(names(&page), ["b-3"]);
    assert_eq!(page["nodes"][0]["served_version"], 1);
    let with_page = app
        .call_ok(
            "pipeline.get",
            json!({"id": p.id, "nodes": {"stage": "none", "offset": 2}}),
        )
        .await;
    assert_eq!(with_page["nodes"], page);
    assert_eq!(with_page["admitted"], detail["admitted"]);
    let message = app
        .call_refused(
            "pipeline.nodes",
            json!({"pipeline_id": p.id, "stage": "first"}),
            400,
        )
        .await;
    assert!(message.starts_with("stage:"), "{message}");
    let message = app
        .call_refused(
            "pipeline.get",
            json!({"id": p.id, "nodes": {"limit": 0}}),
            400,
        )
        .await;
    assert!(message.starts_with("limit:"), "{message}");

    // The summary alone: one row, as `pipeline.list` has it.
    let summary = app.call_ok("pipeline.summary", json!({"id": p.id})).await;
    let list = app
        .call_ok("pipeline.list", json!({"environment_id": app.env_id}))
        .await;
    assert_eq!(summary, list[0]);
    assert_eq!(summary["environment_id"], json!(app.env_id));
}

#[tokio::test]
async fn the_deploy_preview_is_counted_by_the_server_with_a_sample_of_names() {
    let app = TestApp::spawn().await;
    for i in 0..30 {
        app.enroll(&format!("edge-{i:02}"), &[("tier", "edge")])
            .await;
    }
    app.enroll("db-1", &[("tier", "db")]).await;
    let p = app.create_pipeline("logs", &[("tier", "edge")]).await;

    let preview = app
        .call_ok(
            "release.preview",
            json!({
                "pipeline_id": p.id,
                "release_id": "a-release",
                "selectors": [{"percentage": 10}, {"percentage": 100}, {"labels": {}}],
            }),
        )
        .await;
    assert_eq!(preview["admitted"], 30);
    assert_eq!(preview["excluded"], 1);
    assert_eq!(preview["excluded_sample"], json!(["db-1"]));
    let first = &preview["stages"][0]["Adds"];
    assert_eq!(
        (first["adds"].clone(), first["targeted"].clone()),
        (json!(3), json!(3))
    );
    let second = &preview["stages"][1]["Adds"];
    assert_eq!(second["adds"], 27);
    assert_eq!(second["names"].as_array().unwrap().len(), 20);
    assert_eq!(preview["stages"][2], json!("FixSelector"));
}
