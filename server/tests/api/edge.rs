//! Rolling rollouts over HTTP: admin routes with optimistic concurrency and validation, the
//! published edge-config document with its strong ETag and read-only token, and the audit
//! trail of every routing change.

use reqwest::header::{AUTHORIZATION, ETAG, IF_MATCH, IF_NONE_MATCH};
use serde_json::{json, Value};
use vf_control::testing::TestDb;

use crate::helpers::TestApp;

const EDGE_TOKEN: &str = "edge-read-only-token-0123";

impl TestApp {
    async fn put_percent(
        &self,
        path: &str,
        percent: Value,
        if_match: Option<&str>,
    ) -> (u16, Value, Option<String>) {
        let mut req = self
            .api
            .put(format!("{}/api/admin/rollouts/{path}", self.url))
            .json(&json!({ "percent": percent }));
        if let Some(v) = if_match {
            req = req.header(IF_MATCH, v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let etag = resp
            .headers()
            .get(ETAG)
            .map(|v| v.to_str().unwrap().to_string());
        (status, resp.json().await.unwrap_or(Value::Null), etag)
    }

    async fn delete_path(&self, path: &str, if_match: &str) -> (u16, Value) {
        let resp = self
            .api
            .delete(format!("{}/api/admin/rollouts/{path}", self.url))
            .header(IF_MATCH, if_match)
            .send()
            .await
            .unwrap();
        (
            resp.status().as_u16(),
            resp.json().await.unwrap_or(Value::Null),
        )
    }

    async fn edge_config(&self, etag: Option<&str>) -> reqwest::Response {
        let mut req = self.api.get(format!("{}/api/edge-config", self.url));
        if let Some(e) = etag {
            req = req.header(IF_NONE_MATCH, e);
        }
        req.send().await.unwrap()
    }
}

#[tokio::test]
async fn a_percent_change_records_the_previous_percent_and_when_it_changed() {
    let app = TestApp::spawn().await;
    let (status, body, etag) = app.put_percent("v2-cache", json!(20), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(etag.as_deref(), Some("\"1\""));
    let t1 = app.now();
    app.clock.advance_ms(5_000);
    let (status, body, _) = app.put_percent("v2-cache", json!(35), Some("\"1\"")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["global"],
        json!({"percent": 35, "previousPercent": 20, "changedAt": t1 + 5_000})
    );
    assert_eq!(body["rowVersion"], 2);
}

#[tokio::test]
async fn two_admins_cannot_silently_overwrite_each_other() {
    let app = TestApp::spawn().await;
    app.put_percent("v2-cache", json!(20), None).await;
    // Both saw version 1; the first save wins, the second is refused with 412.
    let (first, _, _) = app.put_percent("v2-cache", json!(30), Some("\"1\"")).await;
    let (second, body, _) = app.put_percent("v2-cache", json!(50), Some("\"1\"")).await;
    assert_eq!((first, second), (200, 412));
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("changed meanwhile"),
        "{body}"
    );
    // Changing an existing rollout without saying which version you saw: 428.
    let (status, _, _) = app.put_percent("v2-cache", json!(60), None).await;
    assert_eq!(status, 428);
    let doc: Value = app.edge_config(None).await.json().await.unwrap();
    assert_eq!(doc["rollouts"]["v2-cache"]["global"]["percent"], 30);
}

#[tokio::test]
async fn bad_percents_and_ids_are_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    for bad in [json!(101), json!(-1), json!(12.5), json!("50"), Value::Null] {
        let (status, body, _) = app.put_percent("v2-cache", bad.clone(), None).await;
        assert_eq!(status, 400, "{bad}");
        assert!(
            body["error"].as_str().unwrap().starts_with("percent:"),
            "{body}"
        );
    }
    let long = "x".repeat(129);
    let (status, body, _) = app.put_percent(&long, json!(10), None).await;
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().starts_with("rollout:"),
        "{body}"
    );
    let (status, body, _) = app.put_percent("ok/orgs/bad%20org", json!(10), None).await;
    assert_eq!(
        status, 404,
        "an override of a rollout that does not exist: {body}"
    );
    let doc: Value = app.edge_config(None).await.json().await.unwrap();
    assert_eq!(doc["rollouts"], json!({}), "nothing was stored");
}

#[tokio::test]
async fn an_org_override_wins_and_removing_it_is_a_recorded_routing_change() {
    let app = TestApp::spawn().await;
    app.put_percent("v2-cache", json!(50), None).await;
    let (status, body, _) = app
        .put_percent("v2-cache/orgs/org_big", json!(0), Some("\"1\""))
        .await;
    assert_eq!(status, 200, "{body}");
    let doc: vf_rolling::EdgeConfig = app.edge_config(None).await.json().await.unwrap();
    let customer = vf_rolling::find_customer_in_bucket_range(0, 10).unwrap();
    let bucket = vf_rolling::bucket(&customer);
    assert!(doc.enabled("v2-cache", None, bucket));
    assert!(!doc.enabled("v2-cache", Some("org_big"), bucket));
    let cached_at = app.now();
    app.clock.advance_ms(1_000);
    let (status, _) = app.delete_path("v2-cache/orgs/org_big", "\"2\"").await;
    assert_eq!(status, 200);
    let doc: vf_rolling::EdgeConfig = app.edge_config(None).await.json().await.unwrap();
    assert!(
        doc.enabled("v2-cache", Some("org_big"), bucket),
        "the org follows the global percent again"
    );
    assert!(
        doc.is_cache_stale("v2-cache", Some("org_big"), bucket, Some(cached_at)),
        "an entry cached before the removal is stale: its routing moved"
    );
    let trail = vf_control::testing::audit_for_target(&app.control.db, "rollout", "v2-cache", 10)
        .await
        .unwrap();
    let actions: Vec<&str> = trail.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "rollout.org.remove",
            "rollout.org.percent",
            "rollout.percent"
        ]
    );
    let details: Value = serde_json::from_str(&trail[0].details).unwrap();
    assert_eq!(details["before"]["percent"], 0);
    assert_eq!(details["after"], Value::Null);
}

#[tokio::test]
async fn deleting_a_rollout_turns_everyone_off_and_stays_visible_to_caches() {
    let app = TestApp::spawn().await;
    app.put_percent("billing-v2", json!(100), None).await;
    let cached_at = app.now();
    app.clock.advance_ms(1_000);
    let (status, body) = app.delete_path("billing-v2", "\"1\"").await;
    assert_eq!(status, 200, "{body}");
    let doc: vf_rolling::EdgeConfig = app.edge_config(None).await.json().await.unwrap();
    assert!(!doc.enabled("billing-v2", None, 3));
    assert!(doc.is_cache_stale("billing-v2", None, 3, Some(cached_at)));
    let trail = vf_control::testing::audit_for_target(&app.control.db, "rollout", "billing-v2", 10)
        .await
        .unwrap();
    assert_eq!(trail[0].action, "rollout.delete");
}

#[tokio::test]
async fn the_edge_config_has_a_strong_etag_and_answers_304_until_it_changes() {
    let app = TestApp::spawn().await;
    let empty = app.edge_config(None).await;
    assert_eq!(empty.status(), 200);
    let etag0 = empty.headers()[ETAG].to_str().unwrap().to_string();
    assert!(!etag0.starts_with("W/"), "strong ETag");
    assert_eq!(app.edge_config(Some(&etag0)).await.status(), 304);
    app.put_percent("v2-cache", json!(10), None).await;
    let changed = app.edge_config(Some(&etag0)).await;
    assert_eq!(changed.status(), 200);
    let etag1 = changed.headers()[ETAG].to_str().unwrap().to_string();
    assert_ne!(etag0, etag1);
    let a = changed.text().await.unwrap();
    app.clock.advance_ms(60_000);
    let b = app.edge_config(None).await.text().await.unwrap();
    assert_eq!(a, b, "one version is always the same bytes");
}

#[tokio::test]
async fn the_edge_config_needs_a_token_and_the_read_only_one_reads_nothing_else() {
    let app = TestApp::spawn_with(TestDb::sqlite(), |c| {
        c.edge_config_token = Some(EDGE_TOKEN.to_string());
    })
    .await;
    let anonymous = reqwest::Client::new();
    let get = |token: Option<&str>| {
        let mut req = anonymous.get(format!("{}/api/edge-config", app.url));
        if let Some(t) = token {
            req = req.header(AUTHORIZATION, format!("Bearer {t}"));
        }
        req.send()
    };
    let none = get(None).await.unwrap();
    assert_eq!(none.status(), 401);
    assert_eq!(none.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        get(Some("not-the-token-at-all")).await.unwrap().status(),
        401
    );
    assert_eq!(get(Some(EDGE_TOKEN)).await.unwrap().status(), 200);
    assert_eq!(
        app.edge_config(None).await.status(),
        200,
        "an admin API token reads it too"
    );
    // The read-only token changes nothing and reads nothing else.
    let write = anonymous
        .put(format!("{}/api/admin/rollouts/v2-cache", app.url))
        .header(AUTHORIZATION, format!("Bearer {EDGE_TOKEN}"))
        .json(&json!({"percent": 50}))
        .send()
        .await
        .unwrap();
    assert_eq!(write.status(), 401);
    let server_fn = anonymous
        .post(format!("{}/api/admin.edge.get", app.url))
        .header(AUTHORIZATION, format!("Bearer {EDGE_TOKEN}"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(server_fn.status(), 401);
}

#[tokio::test]
async fn rolling_rollouts_work_the_same_on_postgres() {
    let app = TestApp::spawn_postgres().await;
    app.put_percent("v2-cache", json!(20), None).await;
    let (status, body, _) = app.put_percent("v2-cache", json!(40), Some("\"1\"")).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = app.put_percent("v2-cache", json!(45), Some("\"1\"")).await;
    assert_eq!(status, 412);
    let doc: Value = app.edge_config(None).await.json().await.unwrap();
    assert_eq!(doc["rollouts"]["v2-cache"]["global"]["previousPercent"], 20);
}
