//! Secrets stay secret: one scenario uses every credential the server knows (the database
//! password, the first admin's password and a mistyped one, a session, the bootstrap and a
//! minted API token, the bootstrap and a minted enrollment token, node tokens, the
//! edge-config token), each also presented slightly wrong, and then looks for them in
//! everything a person could read: every log line at every level, `/metrics`, the pages, the
//! list answers and the audit log. Only the answer that mints a token shows it, once.
//!
//! The Prometheus bearer token has its own scenario in `promql.rs`
//! (`the_prometheus_bearer_token_appears_in_no_log_answer_gate_evidence_or_audit_event`).
//! The first start's setup link is the one secret logged on purpose; with `VF_ADMIN_EMAIL`
//! set, as here, there is none.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use vf_control::testing::TestDb;
use vf_control::ManualClock;
use vf_protocol::EnrollResponse;

use crate::helpers::{
    browser_with_session, client_with_token, location, session_cookie, test_config, LogCapture,
    TestApp, API_TOKEN, ENROLLMENT_TOKEN, T0,
};

const ADMIN_EMAIL: &str = "root@example.com";
const ADMIN_PASSWORD: &str = "admin-pass-6b1e0c9d";
/// A near miss of the real password: as secret as the password itself.
const MISTYPED_PASSWORD: &str = "admin-pass-6b1e0c9D";
const EDGE_TOKEN: &str = "vfc_secrets-edge-config-token-8e2f";
/// The test role's password ("vf") written percent-encoded in `DATABASE_URL`: the form an
/// operator typed, which a leak of the URL would show.
const DB_PASSWORD_AS_WRITTEN: &str = "%76%66";

/// The scenario's database URL: the test database with its password percent-encoded.
fn database_url(db: &TestDb) -> String {
    let url = db
        .url
        .replacen("vf:vf@", &format!("vf:{DB_PASSWORD_AS_WRITTEN}@"), 1);
    assert_ne!(
        url, db.url,
        "the test database URL carries the password vf: {}",
        db.url
    );
    url
}

/// What a person can read, and where it came from.
struct Readable(Vec<(String, String)>);

impl Readable {
    fn add(&mut self, what: impl Into<String>, text: impl Into<String>) {
        self.0.push((what.into(), text.into()));
    }

    /// A server function's answer, which must be a success.
    async fn call(&mut self, app: &TestApp, client: &reqwest::Client, endpoint: &str, body: Value) {
        let (status, text) = app.call_as(client, endpoint, body).await;
        assert_eq!(status, 200, "{endpoint}: {text}");
        self.add(endpoint, text);
    }

    /// A GET's answer, which must be a success (bounded, so a page that never finishes
    /// rendering fails naming itself).
    async fn get(&mut self, app: &TestApp, client: &reqwest::Client, path: &str) {
        let resp = client
            .get(format!("{}{path}", app.url))
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(resp.status(), 200, "GET {path}");
        self.add(format!("GET {path}"), resp.text().await.unwrap());
    }
}

#[tokio::test(flavor = "current_thread")]
async fn no_secret_appears_in_logs_metrics_pages_or_list_answers() {
    let logs = LogCapture::start();
    let db = TestDb::postgres().await;
    let db_url = database_url(&db);
    let configure = |c: &mut vf_server::Config| {
        c.database_url = db_url.clone();
        c.admin_email = Some(ADMIN_EMAIL.into());
        c.admin_password = Some(ADMIN_PASSWORD.into());
        c.edge_config_token = Some(EDGE_TOKEN.into());
    };
    let mut config = test_config(&db.url);
    configure(&mut config);
    let app = TestApp::spawn_with(db, configure).await;
    let mut readable = Readable(Vec::new());

    // The first admin: a mistyped password, then the right one; a forged session.
    let mistyped = app.sign_in(ADMIN_EMAIL, MISTYPED_PASSWORD).await;
    assert!(location(&mistyped).starts_with("/signin?error="));
    readable.add("sign-in refusal", location(&mistyped));
    let signed_in = app.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD).await;
    let session = session_cookie(&signed_in).expect("a session");
    readable.add("sign-in redirect", location(&signed_in));
    let admin = browser_with_session(&session);
    let forged = app
        .call_as(
            &browser_with_session(&format!("{session}x")),
            "session.me",
            json!({}),
        )
        .await;
    assert_eq!(forged.0, 401);
    readable.add("forged session answer", forged.1);

    // Work done with the session: a pipeline, a minted API token and enrollment token.
    let (status, created) = app
        .call_as(
            &admin,
            "pipeline.create",
            json!({"environment_id": app.env_id, "name": "logs", "node_selector": {}}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    readable.add("pipeline.create", created.clone());
    let pipeline_id = serde_json::from_str::<Value>(&created).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    readable
        .call(
            &app,
            &admin,
            "pipeline.deploy",
            json!({"pipeline_id": pipeline_id, "config_yaml": "v: 1\n", "changelog": "first"}),
        )
        .await;
    // The answers that mint a token show it, once: they are not in `readable`.
    let (status, minted) = app
        .call_as(
            &admin,
            "api_token.create",
            json!({"name": "ci", "environment_id": app.env_id, "role": "editor"}),
        )
        .await;
    assert_eq!(status, 200, "{minted}");
    let api_token: String = serde_json::from_str(&minted).unwrap();
    let (status, minted) = app
        .call_as(
            &admin,
            "environment.token.create",
            json!({"environment_id": app.env_id, "label": "rack-7"}),
        )
        .await;
    assert_eq!(status, 200, "{minted}");
    let enrollment_token: String = serde_json::from_str(&minted).unwrap();

    // Agents: one enrolls over HTTP with the bootstrap token, a real agent with the minted
    // one; both poll and report. A node token with a typo is refused.
    let node: EnrollResponse = app.enroll("edge-1", &[]).await;
    let mut agent = vf_agent::Agent::start(vf_agent::AgentOptions {
        enrollment_token: enrollment_token.clone(),
        ..app.agent_options("edge-2", &[])
    })
    .await
    .expect("the agent enrolls with the minted token");
    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();
    let identity: Value = serde_json::from_slice(
        &std::fs::read(app.agent_dir("edge-2").join("identity.json")).unwrap(),
    )
    .unwrap();
    let agent_token = identity["nodeToken"].as_str().unwrap().to_string();
    assert_eq!(app.get_config(&node.node_token, None).await.status(), 200);
    let heartbeat = json!({"pipelines": [{"pipelineId": pipeline_id, "version": 1,
        "status": "RUNNING", "eventsIn": 5, "eventsOut": 5}]});
    let beat = app
        .post_heartbeat(&node.node_token, heartbeat.to_string())
        .await;
    assert_eq!(beat.status(), 200);
    let typo = app.get_config(&format!("{}x", node.node_token), None).await;
    assert_eq!(typo.status(), 401);
    readable.add("refused node token answer", typo.text().await.unwrap());
    let bad_enroll = app
        .post_enroll(
            json!({"token": format!("{enrollment_token}x"), "hostname": "edge-3"}).to_string(),
        )
        .await;
    assert_eq!(bad_enroll.status(), 401);
    readable.add(
        "refused enrollment answer",
        bad_enroll.text().await.unwrap(),
    );

    // The minted API token works, is mistyped, is revoked, and is refused.
    let ci = client_with_token(&api_token);
    let env = json!({"environment_id": app.env_id});
    readable.call(&app, &ci, "pipeline.list", env.clone()).await;
    let (status, text) = app
        .call_as(
            &client_with_token(&format!("{api_token}x")),
            "pipeline.list",
            env.clone(),
        )
        .await;
    assert_eq!(status, 401);
    readable.add("mistyped API token answer", text);

    // The edge config, with its token and with a typo of it.
    let edge = client_with_token(EDGE_TOKEN);
    readable.get(&app, &edge, "/api/edge-config").await;
    let refused = client_with_token(&format!("{EDGE_TOKEN}x"))
        .get(format!("{}/api/edge-config", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    readable.add("refused edge token answer", refused.text().await.unwrap());

    // Everything there is to read: lists (by the session and by the bootstrap token), pages,
    // metrics.
    for client in [&admin, &app.api] {
        for (endpoint, body) in [
            ("api_token.list", json!({})),
            ("environment.tokens", env.clone()),
            ("environment.list", json!({})),
            ("user.list", json!({})),
            ("session.me", json!({})),
            ("fleet.nodes", env.clone()),
            ("pipeline.list", env.clone()),
            ("pipeline.get", json!({"id": pipeline_id})),
            ("pipeline.nodes", json!({"pipeline_id": pipeline_id})),
            ("admin.edge.get", json!({})),
            ("audit.list", json!({"query": {"limit": 500}})),
        ] {
            readable.call(&app, client, endpoint, body).await;
        }
        readable.get(&app, client, "/api/admin/rollouts").await;
    }
    let revoke_id = {
        let (_, list) = app.call_as(&admin, "api_token.list", json!({})).await;
        let rows: Vec<Value> = serde_json::from_str(&list).unwrap();
        rows.iter().find(|r| r["name"] == "ci").unwrap()["id"].clone()
    };
    readable
        .call(
            &app,
            &admin,
            "api_token.revoke",
            json!({"token_id": revoke_id}),
        )
        .await;
    assert_eq!(app.call_as(&ci, "pipeline.list", env.clone()).await.0, 401);
    for path in [
        "/".to_string(),
        "/groups".to_string(),
        "/pipelines".to_string(),
        format!("/pipelines/{pipeline_id}"),
        "/environments".to_string(),
        "/admin/edge-config".to_string(),
        "/audit".to_string(),
    ] {
        readable.get(&app, &admin, &path).await;
    }
    readable.get(&app, &admin, "/metrics").await;
    readable.add("Debug of the configuration", format!("{config:?}"));
    readable.add("Debug of the control handle", format!("{:?}", app.control));

    // Signing out, last.
    let out = app.post_form(&admin, "/signout", &[]).await;
    assert_eq!(out.status(), 303);

    let secrets = [
        ("the database URL", db_url.clone()),
        (
            "the database password as written",
            DB_PASSWORD_AS_WRITTEN.to_string(),
        ),
        ("the admin password", ADMIN_PASSWORD.to_string()),
        ("a mistyped admin password", MISTYPED_PASSWORD.to_string()),
        ("the session token", session.clone()),
        ("the bootstrap API token", API_TOKEN.to_string()),
        ("a minted API token", api_token.clone()),
        (
            "the bootstrap enrollment token",
            ENROLLMENT_TOKEN.to_string(),
        ),
        ("a minted enrollment token", enrollment_token.clone()),
        ("a node token", node.node_token.clone()),
        ("the real agent's node token", agent_token.clone()),
        ("the edge-config token", EDGE_TOKEN.to_string()),
    ];
    let logs = logs.text();
    // The scenario was logged, from start-up to the refusals, at every level.
    for expected in [
        "first start: created the admin from VF_ADMIN_EMAIL",
        "sign-in failed",
        "DEBUG",
        "TRACE",
    ] {
        assert!(
            logs.contains(expected),
            "{expected} is not in the logs:\n{logs}"
        );
    }
    assert!(
        !logs.contains("/setup?token="),
        "no setup link with VF_ADMIN_EMAIL set"
    );
    for (secret, value) in &secrets {
        assert!(
            !logs.contains(value.as_str()),
            "{secret} is in the logs:\n{}",
            lines_with(&logs, value)
        );
        for (what, text) in &readable.0 {
            assert!(
                !text.contains(value.as_str()),
                "{secret} is in {what}: {text}"
            );
        }
    }
}

/// The log lines that contain `needle`, for a failure message that does not drown.
fn lines_with(logs: &str, needle: &str) -> String {
    logs.lines()
        .filter(|l| l.contains(needle))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "current_thread")]
async fn a_refused_database_password_appears_in_neither_the_start_up_error_nor_the_logs() {
    let logs = LogCapture::start();
    let db = TestDb::postgres().await;
    let wrong = "wrong-db-password-51c4";
    let mut config = test_config(&db.url);
    config.database_url = db.url.replacen("vf:vf@", &format!("vf:{wrong}@"), 1);
    assert_ne!(config.database_url, db.url);

    let failed = vf_server::build_with_clock(config.clone(), Arc::new(ManualClock::new(T0))).await;

    let error = match failed {
        Ok(_) => panic!("a wrong database password must stop the start"),
        Err(e) => e,
    };
    // What `main` logs when start-up fails, and the configuration it logs at start.
    let shown = [
        format!("{error:#}"),
        format!("{error:?}"),
        format!("{config:?}"),
        logs.text(),
    ];
    assert!(
        shown[0].contains("password authentication failed"),
        "the error says what is wrong: {}",
        shown[0]
    );
    for text in &shown {
        assert!(!text.contains(wrong), "the password is in: {text}");
    }
}
