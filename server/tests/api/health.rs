//! Liveness, readiness and the Prometheus endpoint.

use reqwest::StatusCode;

use crate::helpers::TestApp;

#[tokio::test]
async fn healthz_and_readyz_answer_200() {
    let app = TestApp::spawn().await;

    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    assert_eq!(app.get("/readyz").await.status(), StatusCode::OK);
}

#[tokio::test]
async fn metrics_count_the_pipelines_served_to_agents_by_fencing_decision() {
    let app = TestApp::spawn().await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "sources: {}\n").await;
    app.create_pipeline("edge-only", &[("tier", "edge")]).await;
    let before = app.get("/metrics").await.text().await.unwrap();
    assert!(!before.contains(r#"served="deployed""#), "{before}");

    let node = app.enroll("core-1", &[("tier", "core")]).await;
    assert_eq!(
        app.get_config(&node.node_token, None).await.status(),
        StatusCode::OK
    );

    let resp = app.get("/metrics").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let anonymous = reqwest::get(format!("{}/metrics", app.url)).await.unwrap();
    assert_eq!(
        anonymous.status(),
        StatusCode::UNAUTHORIZED,
        "pipeline names are not public"
    );
    let text = resp.text().await.unwrap();
    let served: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("vectorflow_config_pipelines_served"))
        .collect();
    assert!(
        served.contains(&r#"vectorflow_config_pipelines_served_total{served="deployed"} 1"#),
        "{text}"
    );
    assert!(
        served.contains(&r#"vectorflow_config_pipelines_served_total{served="not_selected"} 1"#),
        "{text}"
    );
}
