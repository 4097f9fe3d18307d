//! Rolling rollouts over HTTP: admin routes with optimistic concurrency and validation, the
//! published edge-config document with its strong ETag and read-only token, and the audit
//! trail of every routing change.

use reqwest::header::{AUTHORIZATION, ETAG, IF_MATCH, IF_NONE_MATCH};
use serde_json::{json, Value};
use vf_control::testing::TestDb;

use crate::helpers::{TestApp, OPERATOR};

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

    /// `PUT` with a whole JSON body (`percent` and `comment`).
    async fn put_percent_with(&self, path: &str, body: Value, if_match: &str) -> (u16, Value) {
        let resp = self
            .api
            .put(format!("{}/api/admin/rollouts/{path}", self.url))
            .header(IF_MATCH, if_match)
            .json(&body)
            .send()
            .await
            .unwrap();
        (
            resp.status().as_u16(),
            resp.json().await.unwrap_or(Value::Null),
        )
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

/// The newest entries of the page's change history (`admin.edge.get`).
async fn history(app: &TestApp) -> Vec<Value> {
    let view = app.call_ok("admin.edge.get", json!({})).await;
    view["history"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_comment_is_kept_with_the_change_and_the_history_reads_it_back() {
    let app = TestApp::spawn().await;
    let created = app
        .call_ok(
            "admin.rollout.set",
            json!({"name": "checkout-v2", "percent": 20, "comment": "  first customers  "}),
        )
        .await;
    app.clock.advance_ms(1_000);
    app.call_ok(
        "admin.rollout.set",
        json!({"name": "checkout-v2", "percent": 50, "row_version": created["row_version"],
               "comment": "load test passed"}),
    )
    .await;
    // Through the REST route too, and a change without a comment has none.
    let (status, body) = app
        .put_percent_with(
            "checkout-v2/orgs/org_big",
            json!({"percent": 5, "comment": "their SLA"}),
            "\"2\"",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = app
        .put_percent("checkout-v2", json!(60), Some("\"3\""))
        .await;
    assert_eq!(status, 200);

    let h = history(&app).await;
    let summary: Vec<Value> = h
        .iter()
        .map(|e| {
            json!([
                e["action"],
                e["org"],
                e["before"],
                e["after"],
                e["created"],
                e["comment"]
            ])
        })
        .collect();
    assert_eq!(
        summary,
        [
            json!(["rollout.percent", null, 50, 60, false, null]),
            json!([
                "rollout.org.percent",
                "org_big",
                null,
                5,
                false,
                "their SLA"
            ]),
            json!(["rollout.percent", null, 20, 50, false, "load test passed"]),
            json!(["rollout.percent", null, 0, 20, true, "first customers"]),
        ],
        "newest first, comments trimmed"
    );
    assert_eq!(h[2]["actor"], OPERATOR);
    assert_eq!(h[2]["rollout"], "checkout-v2");
    assert_eq!(
        h[3]["at"].as_i64().unwrap() + 1_000,
        h[2]["at"].as_i64().unwrap()
    );
    // The audit log holds the same comment: it is the one record of the change.
    let trail =
        vf_control::testing::audit_for_target(&app.control.db, "rollout", "checkout-v2", 10)
            .await
            .unwrap();
    let details: Value = serde_json::from_str(&trail[2].details).unwrap();
    assert_eq!(details["comment"], "load test passed");
}

#[tokio::test]
async fn a_comment_over_500_characters_is_refused_naming_the_field_and_nothing_changes() {
    let app = TestApp::spawn().await;
    app.call_ok(
        "admin.rollout.set",
        json!({"name": "checkout-v2", "percent": 20}),
    )
    .await;
    let message = app
        .call_refused(
            "admin.rollout.set",
            json!({"name": "checkout-v2", "percent": 50, "row_version": 1,
                   "comment": "x".repeat(501)}),
            400,
        )
        .await;
    assert!(
        message.starts_with("comment: at most 500 characters"),
        "{message}"
    );
    let (status, body) = app
        .put_percent_with(
            "checkout-v2",
            json!({"percent": 50, "comment": "y".repeat(501)}),
            "\"1\"",
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().starts_with("comment:"),
        "{body}"
    );
    let doc: Value = app.edge_config(None).await.json().await.unwrap();
    assert_eq!(doc["rollouts"]["checkout-v2"]["global"]["percent"], 20);
    // 500 characters exactly are fine.
    app.call_ok(
        "admin.rollout.set",
        json!({"name": "checkout-v2", "percent": 50, "row_version": 1, "comment": "z".repeat(500)}),
    )
    .await;
}

#[tokio::test]
async fn out_of_range_percents_are_refused_by_the_server_function_too() {
    let app = TestApp::spawn().await;
    for bad in [150, -1, 101] {
        let message = app
            .call_refused(
                "admin.rollout.set",
                json!({"name": "checkout-v2", "percent": bad}),
                400,
            )
            .await;
        assert!(message.starts_with("percent:"), "{bad}: {message}");
        let message = app
            .call_refused(
                "admin.rollout.set",
                json!({"name": "checkout-v2", "org": "org_big", "percent": bad}),
                400,
            )
            .await;
        assert!(message.starts_with("percent:"), "{bad}: {message}");
    }
    let doc: Value = app.edge_config(None).await.json().await.unwrap();
    assert_eq!(doc["rollouts"], json!({}), "nothing was stored");
}

#[tokio::test]
async fn deleting_through_the_server_function_needs_the_rollouts_name_exactly() {
    let app = TestApp::spawn().await;
    app.call_ok(
        "admin.rollout.set",
        json!({"name": "checkout-v2", "percent": 40}),
    )
    .await;
    for wrong in [
        json!({"confirm_name": "checkout"}),
        json!({"confirm_name": "CHECKOUT-V2"}),
        json!({}),
    ] {
        let mut body = json!({"name": "checkout-v2", "row_version": 1});
        body.as_object_mut()
            .unwrap()
            .extend(wrong.as_object().unwrap().clone());
        let message = app.call_refused("admin.rollout.delete", body, 400).await;
        assert_eq!(
            message, "confirm_name: must be the rollout's name, checkout-v2, exactly",
            "{wrong}"
        );
    }
    let doc: Value = app.edge_config(None).await.json().await.unwrap();
    assert_eq!(
        doc["rollouts"]["checkout-v2"]["global"]["percent"], 40,
        "still on"
    );
    let deleted = app
        .call_ok(
            "admin.rollout.delete",
            json!({"name": "checkout-v2", "row_version": 1, "confirm_name": "checkout-v2"}),
        )
        .await;
    assert!(deleted["retired_at"].is_i64(), "{deleted}");
    let h = history(&app).await;
    assert_eq!(h[0]["action"], "rollout.delete");
    assert_eq!((&h[0]["before"], &h[0]["after"]), (&json!(40), &json!(0)));
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
    app.call_ok(
        "admin.rollout.set",
        json!({"name": "v2-cache", "percent": 50, "row_version": 2, "comment": "on postgres"}),
    )
    .await;
    let h = history(&app).await;
    assert_eq!(
        json!([h[0]["before"], h[0]["after"], h[0]["comment"]]),
        json!([40, 50, "on postgres"])
    );
}
