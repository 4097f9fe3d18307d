//! `fleet.nodes` answers one page of the environment's nodes, filtered, with counts of all.

use serde_json::{json, Value};

use crate::helpers::TestApp;

fn names(page: &Value) -> Vec<&str> {
    page["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
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
