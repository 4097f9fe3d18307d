//! Webhooks: a release event reaches a registered receiver signed with its secret, a 500 is
//! retried with backoff, a delivery written before a restart is sent after it, and the secret
//! appears in no answer and no log line.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};
use vf_control::webhooks;

use crate::helpers::{LogCapture, TestApp};

const SECRET: &str = "whsec-0123456789abcdef";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: String,
}

/// A local HTTP receiver: records every request and answers the next queued status (200
/// once the queue is empty).
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    answers: Arc<Mutex<VecDeque<u16>>>,
}

impl Receiver {
    async fn start(answers: &[u16]) -> (Receiver, String) {
        let receiver = Receiver::default();
        receiver.answers.lock().unwrap().extend(answers);
        let state = receiver.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let state = state.clone();
                async move {
                    state.got.lock().unwrap().push(Received { headers, body });
                    let status = state.answers.lock().unwrap().pop_front().unwrap_or(200);
                    StatusCode::from_u16(status).unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, url)
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

/// The signature a receiver checks: HMAC-SHA256 of `<timestamp>.<body>` with the secret.
fn verify(r: &Received) {
    let timestamp: i64 = header(r, "x-vectorflow-timestamp").parse().unwrap();
    assert_eq!(
        header(r, "x-vectorflow-signature"),
        webhooks::signature(SECRET, timestamp, &r.body),
        "signed over exactly the body sent"
    );
}

async fn release_on_new_pipeline(app: &TestApp) -> String {
    app.enroll("edge-1", &[]).await;
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "sources: {}\n# v1\n").await;
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": pipeline.id, "config_yaml": "sources: {}\n# v2\n",
            "rollout_plan": {"stages": [{"selector": {"percentage": 100}, "bakeSeconds": 60, "gates": []}]},
        }))
        .await;
    id
}

async fn deliver(app: &TestApp) -> usize {
    webhooks::deliver_due(&app.control, &reqwest::Client::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_release_event_is_delivered_signed_and_a_500_is_retried_with_backoff() {
    let logs = LogCapture::start();
    let app = TestApp::spawn().await;
    let (receiver, url) = Receiver::start(&[500]).await;
    let created = app
        .call_ok(
            "webhook.create",
            json!({"environment_id": app.env_id, "url": url,
                   "events": ["release.created", "release.rolled_back"], "secret": SECRET}),
        )
        .await;
    assert_eq!(created["secret"], SECRET, "shown once, at creation");
    let hook = created["webhook"]["id"].as_str().unwrap().to_owned();

    let release = release_on_new_pipeline(&app).await;
    assert_eq!(deliver(&app).await, 1);
    let first = receiver.got();
    assert_eq!(first.len(), 1);
    verify(&first[0]);
    assert_eq!(header(&first[0], "x-vectorflow-event"), "release.created");
    let body: Value = serde_json::from_str(&first[0].body).unwrap();
    assert_eq!(body["event"], "release.created");
    assert_eq!(body["release"]["id"], release);
    assert_eq!(body["id"], header(&first[0], "idempotency-key"));

    let deliveries = app
        .call_ok("webhook.deliveries", json!({"webhook_id": hook}))
        .await;
    let d = &deliveries[0];
    assert_eq!(
        (
            d["status"].as_str(),
            d["attempts"].as_i64(),
            d["response_code"].as_i64()
        ),
        (Some("pending"), Some(1), Some(500))
    );
    assert_eq!(d["next_attempt_at"], app.now() + 10_000, "retried in 10 s");
    assert_eq!(deliver(&app).await, 0, "not due yet");

    app.clock.advance_ms(10_000);
    assert_eq!(deliver(&app).await, 1);
    let both = receiver.got();
    assert_eq!(both.len(), 2);
    verify(&both[1]);
    assert_eq!(
        header(&both[1], "idempotency-key"),
        header(&both[0], "idempotency-key"),
        "the same delivery, so the receiver can deduplicate"
    );
    let deliveries = app
        .call_ok("webhook.deliveries", json!({"webhook_id": hook}))
        .await;
    assert_eq!(deliveries[0]["status"], "delivered");
    assert_eq!(deliveries[0]["attempts"], 2);

    // An operator's rollback is an event too; redeliver sends a delivered one again.
    app.call_ok("release.canary.rollback", json!({"release_id": release}))
        .await;
    assert_eq!(deliver(&app).await, 1);
    let last = receiver.got().pop().unwrap();
    assert_eq!(header(&last, "x-vectorflow-event"), "release.rolled_back");
    let id = deliveries[0]["id"].as_str().unwrap();
    app.call_ok("webhook.redeliver", json!({"delivery_id": id}))
        .await;
    assert_eq!(deliver(&app).await, 1);
    assert_eq!(receiver.got().len(), 4);

    // The secret is in no answer and no log line.
    let listed = app
        .call_ok("webhook.list", json!({"environment_id": app.env_id}))
        .await;
    assert_eq!(listed[0]["url"], url);
    assert!(!listed.to_string().contains(SECRET));
    assert!(!deliveries.to_string().contains(SECRET));
    assert!(!logs.text().contains(SECRET), "the secret was logged");
}

#[tokio::test]
async fn a_delivery_written_before_a_restart_is_sent_after_it() {
    let app = TestApp::spawn().await;
    let (receiver, url) = Receiver::start(&[]).await;
    app.call_ok(
        "webhook.create",
        json!({"environment_id": app.env_id, "url": url, "events": ["release.created"], "secret": SECRET}),
    )
    .await;
    release_on_new_pipeline(&app).await;
    let now = app.now();
    // Stopped before any delivery pass: the delivery waits in the database.
    let app = app.restart_with(now, |_| {}).await;
    assert!(receiver.got().is_empty());
    assert_eq!(deliver(&app).await, 1);
    let got = receiver.got();
    assert_eq!(got.len(), 1);
    verify(&got[0]);
    assert_eq!(header(&got[0], "x-vectorflow-event"), "release.created");
}

#[tokio::test]
async fn a_webhook_is_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    let create = |url: &str, events: Value, secret: Option<&str>| json!({"environment_id": app.env_id, "url": url, "events": events, "secret": secret});
    let cases = [
        (
            create("ftp://x/hook", json!(["release.created"]), None),
            "url",
        ),
        (create("not a url", json!(["release.created"]), None), "url"),
        (create("http://x/hook", json!([]), None), "events"),
        (
            create(
                "http://x/hook",
                json!(["release.created", "release.exploded"]),
                None,
            ),
            "events[1]",
        ),
        (
            create("http://x/hook", json!(["release.created"]), Some("short")),
            "secret",
        ),
    ];
    for (body, field) in cases {
        let refused = app.call_refused("webhook.create", body, 400).await;
        assert!(
            refused.starts_with(&format!("{field}:")),
            "{field}: {refused}"
        );
    }
    // A generated secret when none is given.
    let created = app
        .call_ok(
            "webhook.create",
            create("https://hooks.example/x", json!(["line.stopped"]), None),
        )
        .await;
    assert!(created["secret"].as_str().unwrap().starts_with("vfw_"));
}

#[tokio::test]
async fn a_freeze_starting_and_ending_is_announced_once_each() {
    let app = TestApp::spawn().await;
    let (receiver, url) = Receiver::start(&[]).await;
    app.call_ok(
        "webhook.create",
        json!({"environment_id": app.env_id, "url": url,
               "events": ["freeze.started", "freeze.ended"], "secret": SECRET}),
    )
    .await;
    let day = |ms: i64| vf_agent::answers::rfc3339(ms)[..10].to_owned();
    let window = format!("{} - {} UTC", day(app.now()), day(app.now() + 86_400_000));
    app.call_ok(
        "freeze.create",
        json!({"environment_id": app.env_id, "window": window, "reason": "holidays"}),
    )
    .await;
    let announce = |now: i64| {
        let ctl = app.control.clone();
        async move {
            vf_control::freeze::announce_freezes(&ctl, now)
                .await
                .unwrap()
        }
    };
    assert_eq!(announce(app.now()).await, 1, "the freeze started");
    assert_eq!(announce(app.now()).await, 0, "and is announced once");
    app.clock.advance_ms(3 * 86_400_000);
    assert_eq!(announce(app.now()).await, 1, "the freeze ended");
    assert_eq!(announce(app.now()).await, 0);

    assert_eq!(deliver(&app).await, 2);
    let got = receiver.got();
    let events: Vec<&str> = got
        .iter()
        .map(|r| header(r, "x-vectorflow-event"))
        .collect();
    assert_eq!(events, ["freeze.started", "freeze.ended"]);
    let started: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(started["environment"]["reason"], "holidays");
    assert_eq!(started["environment"]["id"], app.env_id);
}
