//! Accounts as an operator meets them: signing in through the form, the session cookie,
//! expiry and signing out, disabled users, sign-in rate limits, the first start's admin (a
//! setup link, or `VF_ADMIN_EMAIL`), API tokens shown once, the audit trail of who did what
//! from where, password storage and cross-site request refusal.

use reqwest::header::{ORIGIN, RETRY_AFTER};
use reqwest::StatusCode;
use serde_json::{json, Value};
use vf_control::access::Role;
use vf_control::accounts;
use vf_control::accounts::limiter::WINDOW_MS;
use vf_control::pipelines;
use vf_control::testing::TestDb;

use crate::helpers::{
    browser, browser_with_session, grant, location, session_cookie, session_set_cookie, LogCapture,
    TestApp, PASSWORD, T0,
};

const ANN: &str = "ann@example.com";

/// A user signed in through the form: the session cookie's value.
async fn ann_signed_in(app: &TestApp) -> String {
    app.signed_in_user(ANN, &[grant(&app.env_id, Role::Editor)])
        .await
}

/// `session.me` with the session cookie `value`: the status.
async fn me_status(app: &TestApp, value: &str) -> u16 {
    app.call_as(&browser_with_session(value), "session.me", json!({}))
        .await
        .0
}

// --- signing in ---------------------------------------------------------------------------

#[tokio::test]
async fn signing_in_sets_an_http_only_lax_session_cookie_that_opens_the_pages() {
    let app = TestApp::spawn().await;
    app.create_user(ANN, &[grant(&app.env_id, Role::Viewer)])
        .await;

    let resp = app.sign_in(ANN, PASSWORD).await;

    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/");
    let set_cookie = session_set_cookie(&resp).expect("a session cookie");
    let attributes: Vec<&str> = set_cookie.split(';').map(str::trim).collect();
    for wanted in ["Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=43200"] {
        assert!(attributes.contains(&wanted), "{wanted} in {set_cookie}");
    }
    assert!(
        !attributes.contains(&"Secure"),
        "plain http cannot send a Secure cookie back: {set_cookie}"
    );
    let value = session_cookie(&resp).unwrap();
    assert!(value.starts_with("vfs_"), "{value}");

    let page = browser_with_session(&value)
        .get(format!("{}/", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let (status, me) = app
        .call_as(&browser_with_session(&value), "session.me", json!({}))
        .await;
    assert_eq!(status, 200, "{me}");
    let me: Value = serde_json::from_str(&me).unwrap();
    assert_eq!(me["name"], ANN);
    assert_eq!(me["is_user"], true);
}

#[tokio::test]
async fn behind_https_the_session_cookie_is_secure() {
    let app = TestApp::spawn_with(TestDb::sqlite(), |c| {
        c.public_url = Some("https://vf.example.com".into());
    })
    .await;
    app.create_user(ANN, &[grant(&app.env_id, Role::Viewer)])
        .await;

    let resp = app.sign_in(ANN, PASSWORD).await;

    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let set_cookie = session_set_cookie(&resp).expect("a session cookie");
    let attributes: Vec<&str> = set_cookie.split(';').map(str::trim).collect();
    assert!(attributes.contains(&"Secure"), "{set_cookie}");
    assert!(attributes.contains(&"HttpOnly"), "{set_cookie}");
}

#[tokio::test]
async fn a_tls_proxy_saying_https_makes_the_session_cookie_secure() {
    let app = TestApp::spawn().await;
    app.create_user(ANN, &[grant(&app.env_id, Role::Viewer)])
        .await;
    let resp = browser()
        .post(format!("{}/signin", app.url))
        .header("x-forwarded-proto", "https")
        .form(&[("email", ANN), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    let set_cookie = session_set_cookie(&resp).expect("a session cookie");
    assert!(
        set_cookie.split(';').map(str::trim).any(|a| a == "Secure"),
        "{set_cookie}"
    );
}

#[tokio::test]
async fn a_page_without_a_session_sends_you_to_sign_in_and_back_to_it_after() {
    let app = TestApp::spawn().await;
    app.create_user(ANN, &[grant(&app.env_id, Role::Viewer)])
        .await;

    let home = browser().get(format!("{}/", app.url)).send().await.unwrap();
    assert_eq!(home.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&home), "/signin?next=/");
    let deep = browser()
        .get(format!("{}/pipelines/p1?env=prod", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(deep.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&deep), "/signin?next=/pipelines/p1%3Fenv%3Dprod");

    let back = app
        .post_form(
            &browser(),
            "/signin",
            &[
                ("email", ANN),
                ("password", PASSWORD),
                ("next", "/pipelines/p1?env=prod"),
            ],
        )
        .await;
    assert_eq!(location(&back), "/pipelines/p1?env=prod");
    let elsewhere = app
        .post_form(
            &browser(),
            "/signin",
            &[
                ("email", ANN),
                ("password", PASSWORD),
                ("next", "//evil.example/phish"),
            ],
        )
        .await;
    assert_eq!(
        location(&elsewhere),
        "/",
        "only paths of this site are followed"
    );
}

#[tokio::test]
async fn a_wrong_password_goes_back_to_sign_in_with_the_reason_and_no_session() {
    let app = TestApp::spawn().await;
    app.create_user(ANN, &[grant(&app.env_id, Role::Viewer)])
        .await;

    let wrong = app.sign_in(ANN, "not the password at all").await;
    let unknown = app.sign_in("nobody@example.com", PASSWORD).await;

    for resp in [&wrong, &unknown] {
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert!(session_set_cookie(resp).is_none());
    }
    let reason = location(&wrong);
    assert!(reason.starts_with("/signin?error=credentials&"), "{reason}");
    assert_eq!(
        location(&unknown),
        reason,
        "an unknown email and a wrong password answer alike"
    );
}

// --- sessions -------------------------------------------------------------------------------

#[tokio::test]
async fn a_session_expires_after_its_time_to_live() {
    let app = TestApp::spawn().await;
    let session = ann_signed_in(&app).await;
    let ttl = app.control.settings.session_ttl_ms;
    assert_eq!(
        ttl,
        12 * 60 * 60 * 1000,
        "VF_SESSION_TTL_HOURS defaults to 12"
    );

    app.clock.advance_ms(ttl - 1);
    assert_eq!(me_status(&app, &session).await, 200);
    app.clock.advance_ms(1);
    assert_eq!(me_status(&app, &session).await, 401);
    let page = browser_with_session(&session)
        .get(format!("{}/", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::SEE_OTHER, "back to sign-in");
}

#[tokio::test]
async fn signing_out_ends_the_session_on_the_server_not_only_in_the_browser() {
    let app = TestApp::spawn().await;
    let session = ann_signed_in(&app).await;
    let other_device = app.session_of(ANN).await;
    assert_eq!(me_status(&app, &session).await, 200);

    let out = app
        .post_form(&browser_with_session(&session), "/signout", &[])
        .await;

    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&out), "/signin");
    assert_eq!(
        session_cookie(&out).as_deref(),
        Some(""),
        "the cookie is cleared"
    );
    // A copy of the old cookie (a stolen one, or the browser ignoring the clear) is refused.
    assert_eq!(me_status(&app, &session).await, 401);
    assert_eq!(
        me_status(&app, &other_device).await,
        200,
        "signing out ends this session only"
    );
    let trail = vf_control::audit::list(
        &app.control.db,
        &vf_control::audit::AuditFilter {
            action_prefix: Some("session.sign_out".into()),
            ..Default::default()
        },
        10,
    )
    .await
    .unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].actor, ANN);
}

#[tokio::test]
async fn disabling_a_user_signs_them_out_everywhere_and_keeps_them_out() {
    let app = TestApp::spawn().await;
    let laptop = ann_signed_in(&app).await;
    let phone = app.session_of(ANN).await;
    let ann = accounts::list_users(&app.control.db)
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.email == ANN)
        .unwrap();

    app.call_ok(
        "user.disabled.set",
        json!({"user_id": ann.id, "disabled": true}),
    )
    .await;

    assert_eq!(me_status(&app, &laptop).await, 401);
    assert_eq!(me_status(&app, &phone).await, 401);
    let again = app.sign_in(ANN, PASSWORD).await;
    assert!(session_set_cookie(&again).is_none());
    assert!(location(&again).starts_with("/signin?error="));

    app.call_ok(
        "user.disabled.set",
        json!({"user_id": ann.id, "disabled": false}),
    )
    .await;
    assert_eq!(
        me_status(&app, &laptop).await,
        401,
        "old sessions stay ended"
    );
    let fresh = app.session_of(ANN).await;
    assert_eq!(me_status(&app, &fresh).await, 200);
}

// --- rate limits ---------------------------------------------------------------------------

#[tokio::test]
async fn after_five_failures_an_account_is_locked_even_for_the_right_password_until_the_window_ends(
) {
    let app = TestApp::spawn().await;
    app.create_user(ANN, &[grant(&app.env_id, Role::Viewer)])
        .await;
    for attempt in 1..=5 {
        let resp = app.sign_in(ANN, "a wrong guess at it").await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "attempt {attempt}");
    }

    let locked = app.sign_in(ANN, PASSWORD).await;
    assert_eq!(locked.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(locked.headers()[RETRY_AFTER], "900");
    assert!(session_set_cookie(&locked).is_none());

    app.clock.advance_ms(WINDOW_MS - 60_000);
    let still = app.sign_in(ANN, PASSWORD).await;
    assert_eq!(still.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(still.headers()[RETRY_AFTER], "60");
    let page = still.text().await.unwrap();
    assert!(
        page.contains("too many failed sign-ins; try again in 1 minute<"),
        "a browser shows why: {page}"
    );

    app.clock.advance_ms(60_000);
    let open = app.sign_in(ANN, PASSWORD).await;
    assert_eq!(open.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&open), "/");
    assert!(session_cookie(&open).is_some_and(|c| c.starts_with("vfs_")));

    // What an operator alerts on: failures and lockouts, counted on /metrics.
    let metrics = app.get("/metrics").await.text().await.unwrap();
    for line in [
        "vectorflow_sign_ins_total{result=\"failed\"} 5",
        "vectorflow_sign_ins_total{result=\"locked\"} 2",
        "vectorflow_sign_ins_total{result=\"ok\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
}

#[tokio::test]
async fn one_address_failing_on_many_accounts_is_locked_out_while_other_addresses_sign_in() {
    let app = TestApp::spawn_with(TestDb::sqlite(), |c| {
        c.client_ip_header = Some("x-forwarded-for".into());
    })
    .await;
    app.create_user(ANN, &[grant(&app.env_id, Role::Viewer)])
        .await;
    let sign_in_from = |ip: &'static str, email: String, password: &'static str| {
        browser()
            .post(format!("{}/signin", app.url))
            .header("x-forwarded-for", ip)
            .form(&[("email", email.as_str()), ("password", password)])
            .send()
    };
    // One failure each on twenty accounts: no account reaches its own limit.
    for i in 0..20 {
        let resp = sign_in_from("203.0.113.7", format!("user{i}@example.com"), "guess-guess")
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "attempt {i}");
    }

    let attacker = sign_in_from("203.0.113.7", ANN.into(), PASSWORD)
        .await
        .unwrap();
    assert_eq!(attacker.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(attacker.headers().contains_key(RETRY_AFTER));
    assert!(session_set_cookie(&attacker).is_none());
    let colleague = sign_in_from("198.51.100.2", ANN.into(), PASSWORD)
        .await
        .unwrap();
    assert_eq!(colleague.status(), StatusCode::SEE_OTHER);
    assert!(session_set_cookie(&colleague).is_some());
}

// --- the first admin -------------------------------------------------------------------------

/// The setup token of the link a first start logs.
fn setup_token(logs: &str) -> Option<String> {
    let (_, rest) = logs.split_once("/setup?token=")?;
    Some(
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect(),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn a_first_start_without_an_admin_logs_a_setup_link_that_creates_one_admin_once() {
    let logs = LogCapture::start();
    let app = TestApp::spawn().await;
    let token = setup_token(&logs.text()).expect("a setup link in the logs");
    assert!(token.starts_with("vfu_"), "{token}");
    assert!(!accounts::has_users(&app.control.db).await.unwrap());

    let done = app
        .post_form(
            &browser(),
            "/setup",
            &[
                ("token", &token),
                ("email", "first@example.com"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&done), "/signin?setup=done");
    let first = app.session_of("first@example.com").await;
    let (status, users) = app
        .call_as(&browser_with_session(&first), "user.list", json!({}))
        .await;
    assert_eq!(
        status, 200,
        "the first user is admin of every environment: {users}"
    );

    let again = app
        .post_form(
            &browser(),
            "/setup",
            &[
                ("token", &token),
                ("email", "second@example.com"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(again.status(), StatusCode::SEE_OTHER);
    assert!(location(&again).contains("error="), "{}", location(&again));
    let users = accounts::list_users(&app.control.db).await.unwrap();
    let emails: Vec<&str> = users.iter().map(|u| u.email.as_str()).collect();
    assert_eq!(emails, ["first@example.com"]);

    // A restart with a user in the database logs no new link.
    let restarted = app.restart_with(T0 + 1_000, |_| {}).await;
    drop(restarted);
    assert_eq!(logs.text().matches("/setup?token=").count(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn the_admin_named_by_vf_admin_email_is_created_on_the_first_start_only() {
    let logs = LogCapture::start();
    let configure = |c: &mut vf_server::Config| {
        c.admin_email = Some("root@example.com".into());
        c.admin_password = Some("root password 0451".into());
    };
    let app = TestApp::spawn_with(TestDb::sqlite(), configure).await;
    let root = app.sign_in("root@example.com", "root password 0451").await;
    assert_eq!(location(&root), "/");
    let users = accounts::list_users(&app.control.db).await.unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].grants, [grant("*", Role::Admin)]);

    // A restart on the same database, even with another password, creates no one and
    // changes nothing.
    let restarted = app
        .restart_with(T0, |c| {
            configure(c);
            c.admin_password = Some("another password 0451".into());
        })
        .await;
    assert_eq!(
        accounts::list_users(&restarted.control.db)
            .await
            .unwrap()
            .len(),
        1
    );
    let old = restarted
        .sign_in("root@example.com", "root password 0451")
        .await;
    assert_eq!(location(&old), "/");
    assert!(
        !logs.text().contains("/setup?token="),
        "no setup link is logged"
    );
}

// --- API tokens ------------------------------------------------------------------------------

#[tokio::test]
async fn a_minted_api_token_is_shown_once_listed_by_prefix_only_and_refused_once_revoked() {
    let app = TestApp::spawn().await;

    let token: String = serde_json::from_value(
        app.call_ok(
            "api_token.create",
            json!({"name": "ci", "environment_id": app.env_id, "role": "editor"}),
        )
        .await,
    )
    .unwrap();
    assert!(token.starts_with("vfa_") && token.len() > 30, "{token}");
    let ci = crate::helpers::client_with_token(&token);
    let env = json!({"environment_id": app.env_id});
    assert_eq!(app.call_as(&ci, "pipeline.list", env.clone()).await.0, 200);

    let (status, listed) = app.call("api_token.list", json!({})).await;
    assert_eq!(status, 200);
    assert!(
        !listed.contains(&token),
        "the list shows the token: {listed}"
    );
    let rows: Vec<Value> = serde_json::from_str(&listed).unwrap();
    let row = rows
        .iter()
        .find(|r| r["name"] == "ci")
        .expect("the token is listed");
    let prefix = row["prefix"].as_str().unwrap();
    assert!(
        token.starts_with(prefix) && prefix.len() < token.len() / 2,
        "{prefix}"
    );
    assert_eq!(row["role"], "editor");
    assert_eq!(row["revoked"], false);

    app.call_ok("api_token.revoke", json!({"token_id": row["id"]}))
        .await;

    let (status, refused) = app.call_as(&ci, "pipeline.list", env).await;
    assert_eq!(status, 401, "{refused}");
    let rows: Vec<Value> =
        serde_json::from_value(app.call_ok("api_token.list", json!({})).await).unwrap();
    let row = rows.iter().find(|r| r["name"] == "ci").unwrap();
    assert_eq!(row["revoked"], true);
}

// --- the audit trail ---------------------------------------------------------------------------

#[tokio::test]
async fn the_audit_log_names_the_user_and_their_address_for_a_sign_in_and_for_what_they_do() {
    let app = TestApp::spawn().await;
    let session = ann_signed_in(&app).await;
    let (status, body) = app
        .call_as(
            &browser_with_session(&session),
            "pipeline.create",
            json!({"environment_id": app.env_id, "name": "logs", "node_selector": {}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let events: Vec<Value> = serde_json::from_value(
        app.call_ok("audit.list", json!({"query": {"actor": ANN}}))
            .await,
    )
    .unwrap();

    let seen: Vec<(&str, &str, &str)> = events
        .iter()
        .rev()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["actor"].as_str().unwrap(),
                e["ip"].as_str().unwrap_or("none"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("session.sign_in", ANN, "127.0.0.1"),
            ("pipeline.create", ANN, "127.0.0.1"),
        ]
    );
}

#[tokio::test]
async fn the_audit_log_names_its_targets_and_their_environment() {
    let app = TestApp::spawn().await;
    let p = app.create_pipeline("edge-logs", &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    let events: Vec<Value> = serde_json::from_value(
        app.call_ok("audit.list", json!({"query": {"target_id": p.id}}))
            .await,
    )
    .unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    for e in &events {
        assert_eq!(e["target_name"], "edge-logs", "{e}");
        assert_eq!(e["environment"], "test", "{e}");
    }
    let env: Vec<Value> = serde_json::from_value(
        app.call_ok(
            "audit.list",
            json!({"query": {"target_kind": "environment"}}),
        )
        .await,
    )
    .unwrap();
    assert!(env.iter().all(|e| e["target_name"] == "test"), "{env:?}");
}

// --- password storage ------------------------------------------------------------------------

#[tokio::test]
async fn passwords_are_stored_only_as_argon2id_hashes() {
    let app = TestApp::spawn().await;
    let session = ann_signed_in(&app).await;
    assert_eq!(me_status(&app, &session).await, 200);

    // Everything SQLite holds: the database file and its write-ahead log.
    let path = app.db.url.trim_start_matches("sqlite://").to_string();
    let mut stored = std::fs::read(&path).unwrap();
    stored.extend(std::fs::read(format!("{path}-wal")).unwrap_or_default());
    let stored = String::from_utf8_lossy(&stored);
    assert!(
        stored.contains("$argon2id$v=19$"),
        "an argon2id hash is stored"
    );
    assert!(stored.contains(ANN), "the user's row is in what was read");
    assert!(
        !stored.contains(PASSWORD),
        "the password is stored in the clear"
    );
    let (_, users) = app.call("user.list", json!({})).await;
    assert!(users.contains(ANN), "{users}");
    assert!(
        !users.contains("$argon2"),
        "user.list shows hashes: {users}"
    );
}

// --- cross-site requests -----------------------------------------------------------------------

#[tokio::test]
async fn a_cross_site_post_is_refused_and_changes_nothing_while_same_origin_passes() {
    let app = TestApp::spawn().await;
    let session = ann_signed_in(&app).await;
    let browser = browser_with_session(&session);
    let create = |name: &str| {
        browser
            .post(format!("{}/api/pipeline.create", app.url))
            .json(&json!({"environment_id": app.env_id, "name": name, "node_selector": {}}))
    };

    let cross_site = create("from-another-site")
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    let other_origin = create("from-evil")
        .header(ORIGIN, "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), StatusCode::FORBIDDEN);
    assert_eq!(other_origin.status(), StatusCode::FORBIDDEN);
    assert!(cross_site
        .text()
        .await
        .unwrap()
        .contains("cross-site request refused"));
    assert!(pipelines::list_pipelines(&app.control.db, &app.env_id)
        .await
        .unwrap()
        .is_empty());
    // Signing someone out (or in) from another site is refused too.
    let sign_out = browser
        .post(format!("{}/signout", app.url))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(sign_out.status(), StatusCode::FORBIDDEN);
    assert_eq!(me_status(&app, &session).await, 200, "still signed in");

    let same_origin = create("from-the-app")
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(same_origin.status(), StatusCode::OK);
    let own_origin = create("from-the-app-too")
        .header(ORIGIN, app.url.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(own_origin.status(), StatusCode::OK);
    let mut names: Vec<String> = pipelines::list_pipelines(&app.control.db, &app.env_id)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    names.sort();
    assert_eq!(names, ["from-the-app", "from-the-app-too"]);
}
