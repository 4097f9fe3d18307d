//! Who may call what. One table lists every server function and admin route with the least
//! role it needs and where that role must be held; each row is called by nobody, by the
//! read-only edge-config token, and by viewers, editors and admins (signed in, and by API
//! token) of the environment, of every environment and of another environment. Nobody gets
//! 401, a role too low or held in the wrong place 403, everyone else gets past the door
//! (the action itself may still answer 400, 404, 409, 412 or 428). A server function the
//! table does not list fails the test: a new one must say who may call it.
//!
//! A server function's role and place are not written here: they are read from
//! `app::api::catalog`, the table the API description (`/api/openapi.json`) is built from,
//! and every answer's status must be one that description lists.

use std::collections::BTreeSet;

use app::api::catalog;
use reqwest::header::IF_MATCH;
use reqwest::Method;
use serde_json::{json, Value};
use vf_control::access::Role;
use vf_control::accounts::{self, TokenRole};
use vf_control::audit::{self, AuditFilter};
use vf_control::releases::{self, CanaryRequest};
use vf_control::{fleet, rolling, Actor};

use crate::helpers::{
    browser, browser_with_session, client_with_token, grant, labels, operator, TestApp, PASSWORD,
};
use crate::openapi::Described;

/// Who created the releases the table acts on: none of the callers.
const AUTHOR: &str = "author@example.com";
const EDGE_TOKEN: &str = "vfc_access-edge-config-token-0123";

/// Where a row's role must be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// In the fixtures' environment (a grant there, or in every environment).
    Environment,
    /// In every environment (`*`): objects outside any environment.
    Everywhere,
    /// In any environment at all (lists that filter by environment themselves).
    Anywhere,
    /// Any session or API token.
    SignedIn,
    /// Signed-in users only: API tokens have no password.
    Users,
    /// Viewer in every environment, or the read-only edge-config token.
    EdgeConfig,
}

#[derive(Debug, Clone, Copy)]
enum Call {
    /// `POST /api/<endpoint>` with a JSON body.
    Fn(&'static str),
    /// An admin route; `{id}` in the path is the fresh object's id.
    Route(&'static str, &'static str),
}

/// The object a row acts on, made anew for every call so that one caller's success does not
/// change what the next caller meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fresh {
    Nothing,
    /// A name nobody has used.
    Name,
    /// A pipeline with a deployed version and no release.
    Pipeline,
    /// A progressive release in flight, created by [`AUTHOR`].
    Release,
    /// A plan-less canary in flight, created by [`AUTHOR`].
    PlanlessRelease,
    Group,
    Node,
    EnrollmentToken,
    ApiToken,
    User,
    /// A rollout at row version 1.
    Rollout,
    /// A rollout with an override for org `acme`, at row version 2.
    RolloutWithOrg,
    /// A freeze window of the fixtures' environment (closed at the test's clock).
    FreezeWindow,
    /// The fixtures' environment with its line running, or stopped.
    LineRunning,
    LineStopped,
    /// A webhook of the fixtures' environment.
    Webhook,
    /// A delivery of a webhook of the fixtures' environment.
    WebhookDelivery,
}

struct Made {
    id: String,
    row_version: Option<i64>,
}

struct Row {
    call: Call,
    need: Role,
    scope: Scope,
    fresh: Fresh,
    body: fn(&Fixtures, &Made) -> Value,
}

fn row(
    call: Call,
    need: Role,
    scope: Scope,
    fresh: Fresh,
    body: fn(&Fixtures, &Made) -> Value,
) -> Row {
    Row {
        call,
        need,
        scope,
        fresh,
        body,
    }
}

/// A server function's row. The role it needs and where come from the catalog the API
/// description (`GET /api/openapi.json`) is built from, so this test enforces what the
/// document says.
fn call(endpoint: &'static str, fresh: Fresh, body: fn(&Fixtures, &Made) -> Value) -> Row {
    let Some(listed) = catalog::endpoint(endpoint) else {
        panic!("{endpoint} has no row in app::api::catalog")
    };
    let scope = match listed.scope {
        catalog::Scope::Environment => Scope::Environment,
        catalog::Scope::Everywhere => Scope::Everywhere,
        catalog::Scope::Anywhere => Scope::Anywhere,
        catalog::Scope::SignedIn => Scope::SignedIn,
        catalog::Scope::Users => Scope::Users,
    };
    row(Call::Fn(endpoint), listed.role, scope, fresh, body)
}

fn no_body(_: &Fixtures, _: &Made) -> Value {
    json!({})
}

fn env_body(fx: &Fixtures, _: &Made) -> Value {
    json!({ "environment_id": fx.env })
}

fn release_body(_: &Fixtures, made: &Made) -> Value {
    json!({ "release_id": made.id })
}

fn percent_body(_: &Fixtures, _: &Made) -> Value {
    json!({ "percent": 20 })
}

/// Every server function and admin route, with the least role it needs.
fn table() -> Vec<Row> {
    use Call::{Fn, Route};
    use Fresh as F;
    use Role::{Admin, Viewer};
    use Scope::*;
    vec![
        // --- the caller itself
        call("session.me", F::Nothing, no_body),
        call(
            "session.password.change",
            F::Nothing,
            |_, _| json!({"current_password": "not the current password", "new_password": "another long password"}),
        ),
        // --- environments and enrollment tokens
        call("environment.list", F::Nothing, no_body),
        call(
            "environment.create",
            F::Name,
            |_, m| json!({ "name": m.id }),
        ),
        call("environment.tokens", F::Nothing, env_body),
        call(
            "environment.token.create",
            F::Nothing,
            |fx, _| json!({ "environment_id": fx.env, "label": "access" }),
        ),
        call(
            "environment.token.revoke",
            F::EnrollmentToken,
            |_, m| json!({ "token_id": m.id }),
        ),
        // --- fleet
        call("fleet.nodes", F::Nothing, env_body),
        call(
            "node.get",
            F::Nothing,
            |fx, _| json!({ "node_id": fx.node }),
        ),
        call(
            "node.sample",
            F::Nothing,
            |fx, _| json!({ "node_id": fx.node, "pipeline_id": fx.pipeline, "component_keys": ["in"] }),
        ),
        call(
            "node.sample.results",
            F::Nothing,
            |fx, _| json!({ "node_id": fx.node, "request_id": "no-such-request" }),
        ),
        call(
            "node.tap.start",
            F::Nothing,
            |fx, _| json!({ "node_id": fx.node, "pipeline_id": fx.pipeline, "component_id": "in" }),
        ),
        call(
            "node.tap.stop",
            F::Nothing,
            |fx, _| json!({ "node_id": fx.node, "request_id": "no-such-tap" }),
        ),
        call(
            "node.tap.events",
            F::Nothing,
            |fx, _| json!({ "node_id": fx.node, "request_id": "no-such-tap" }),
        ),
        call(
            "node.restart",
            F::Nothing,
            |fx, _| json!({ "node_id": fx.node, "pipeline_id": fx.pipeline }),
        ),
        // --- webhooks
        call(
            "webhook.create",
            F::Nothing,
            |fx, _| json!({ "environment_id": fx.env, "url": "http://127.0.0.1:9/hook", "events": ["release.created"] }),
        ),
        call("webhook.list", F::Nothing, env_body),
        call("webhook.delete", F::Webhook, |_, m| json!({ "id": m.id })),
        call(
            "webhook.deliveries",
            F::Webhook,
            |_, m| json!({ "webhook_id": m.id }),
        ),
        call(
            "webhook.redeliver",
            F::WebhookDelivery,
            |_, m| json!({ "delivery_id": m.id }),
        ),
        call(
            "fleet.node.labels",
            F::Nothing,
            |fx, _| json!({ "node_id": fx.node, "labels": {"rack": "r1"} }),
        ),
        call(
            "fleet.node.revoke",
            F::Node,
            |_, m| json!({ "node_id": m.id }),
        ),
        call("fleet.groups", F::Nothing, env_body),
        call(
            "fleet.group.create",
            F::Name,
            |fx, m| json!({ "environment_id": fx.env, "name": m.id, "criteria": {"tier": "edge"} }),
        ),
        call("fleet.group.delete", F::Group, |_, m| json!({ "id": m.id })),
        // --- pipelines
        call("pipeline.list", F::Nothing, env_body),
        call(
            "pipeline.create",
            F::Name,
            |fx, m| json!({ "environment_id": fx.env, "name": m.id, "node_selector": {} }),
        ),
        call(
            "pipeline.get",
            F::Nothing,
            |fx, _| json!({ "id": fx.pipeline }),
        ),
        call(
            "pipeline.summary",
            F::Nothing,
            |fx, _| json!({ "id": fx.pipeline }),
        ),
        call(
            "pipeline.nodes",
            F::Nothing,
            |fx, _| json!({ "pipeline_id": fx.pipeline }),
        ),
        call(
            "pipeline.version.config",
            F::Nothing,
            |fx, _| json!({ "pipeline_id": fx.pipeline, "version": 1 }),
        ),
        call(
            "pipeline.diff",
            F::Nothing,
            |fx, _| json!({ "pipeline_id": fx.pipeline }),
        ),
        call(
            "pipeline.release_diff",
            F::Nothing,
            |fx, _| json!({ "pipeline_id": fx.pipeline }),
        ),
        call(
            "pipeline.release_series",
            F::Nothing,
            |fx, _| json!({ "pipeline_id": fx.pipeline }),
        ),
        call(
            "pipeline.deploy",
            F::Pipeline,
            |_, m| json!({ "pipeline_id": m.id, "config_yaml": "v: 3\n", "changelog": "access" }),
        ),
        // --- releases
        call("release.new_id", F::Nothing, no_body),
        call("promql.test", F::Nothing, |_, _| json!({ "query": "up" })),
        call(
            "release.preview",
            F::Nothing,
            |fx, _| json!({ "pipeline_id": fx.pipeline, "release_id": "r", "selectors": [{"percentage": 50}] }),
        ),
        call(
            "release.canary.get",
            F::Nothing,
            |fx, _| json!({ "release_id": fx.release }),
        ),
        call(
            "release.stage.nodes",
            F::Nothing,
            |fx, _| json!({ "release_id": fx.release, "stage": 1 }),
        ),
        call(
            "release.list",
            F::Nothing,
            |fx, _| json!({ "pipeline_id": fx.pipeline }),
        ),
        call(
            "release.history",
            F::Nothing,
            |fx, _| json!({ "pipeline_id": fx.pipeline }),
        ),
        call(
            "release.series",
            F::Nothing,
            |fx, _| json!({ "release_id": fx.release }),
        ),
        call(
            "release.canary.create",
            F::Pipeline,
            |_, m| json!({ "pipeline_id": m.id, "config_yaml": "v: 2\n", "rollout_plan": plan() }),
        ),
        call("release.canary.advance", F::Release, release_body),
        call("release.canary.complete", F::Release, release_body),
        call("release.canary.broaden", F::PlanlessRelease, release_body),
        // Someone else's release: rolling it back is an admin's call.
        call("release.canary.pause", F::Release, release_body),
        call("release.canary.resume", F::Release, release_body),
        call("release.canary.rollback", F::Release, release_body),
        // --- users (outside any environment)
        call("user.list", F::Nothing, no_body),
        call(
            "user.create",
            F::Name,
            |_, m| json!({ "email": format!("{}@example.com", m.id), "password": PASSWORD, "grants": [] }),
        ),
        call(
            "user.grants.set",
            F::User,
            |_, m| json!({ "user_id": m.id, "grants": [{"environment_id": "*", "role": "viewer"}] }),
        ),
        call(
            "user.disabled.set",
            F::User,
            |_, m| json!({ "user_id": m.id, "disabled": true }),
        ),
        call(
            "user.sessions.revoke",
            F::User,
            |_, m| json!({ "user_id": m.id }),
        ),
        call(
            "user.password.set",
            F::User,
            |_, m| json!({ "user_id": m.id, "password": "a new long password" }),
        ),
        // --- API tokens
        call("api_token.list", F::Nothing, no_body),
        call(
            "api_token.create",
            F::Nothing,
            |fx, _| json!({ "name": "ci", "environment_id": fx.env, "role": "viewer" }),
        ),
        // An edge-config token (environment `*`) needs admin of every environment.
        row(
            Fn("api_token.create"),
            Admin,
            Everywhere,
            F::Nothing,
            |_, _| json!({ "name": "ci", "environment_id": "*", "role": "viewer" }),
        ),
        call(
            "api_token.revoke",
            F::ApiToken,
            |_, m| json!({ "token_id": m.id }),
        ),
        // --- the audit log
        call("audit.list", F::Nothing, |_, _| json!({ "query": {} })),
        call("audit.verify", F::Nothing, no_body),
        // --- rolling rollouts and the edge config
        call("admin.edge.get", F::Nothing, no_body),
        call(
            "admin.rollout.set",
            F::Name,
            |_, m| json!({ "name": m.id, "percent": 10 }),
        ),
        call(
            "admin.rollout.org.remove",
            F::RolloutWithOrg,
            |_, m| json!({ "name": m.id, "org": "acme", "row_version": m.row_version }),
        ),
        call(
            "admin.rollout.delete",
            F::Rollout,
            |_, m| json!({ "name": m.id, "row_version": m.row_version, "confirm_name": m.id }),
        ),
        row(
            Route("GET", "/api/admin/rollouts"),
            Viewer,
            Everywhere,
            F::Nothing,
            no_body,
        ),
        row(
            Route("PUT", "/api/admin/rollouts/{id}"),
            Admin,
            Everywhere,
            F::Rollout,
            percent_body,
        ),
        row(
            Route("DELETE", "/api/admin/rollouts/{id}"),
            Admin,
            Everywhere,
            F::Rollout,
            no_body,
        ),
        row(
            Route("PUT", "/api/admin/rollouts/{id}/orgs/acme"),
            Admin,
            Everywhere,
            F::Rollout,
            percent_body,
        ),
        row(
            Route("DELETE", "/api/admin/rollouts/{id}/orgs/acme"),
            Admin,
            Everywhere,
            F::RolloutWithOrg,
            no_body,
        ),
        row(
            Route("GET", "/api/edge-config"),
            Viewer,
            EdgeConfig,
            F::Nothing,
            no_body,
        ),
        row(
            Route("GET", "/metrics"),
            Viewer,
            Everywhere,
            F::Nothing,
            no_body,
        ),
        // --- environment holds (last: a stopped line refuses the releases other rows make)
        call("environment.hold", F::Nothing, env_body),
        call("freeze.list", F::Nothing, env_body),
        call(
            "freeze.create",
            F::Nothing,
            |fx, _| json!({ "environment_id": fx.env, "window": "Sat 00:00 - Sun 00:00 UTC" }),
        ),
        call(
            "freeze.delete",
            F::FreezeWindow,
            |_, m| json!({ "id": m.id }),
        ),
        call("environment.line.stop", F::LineRunning, env_body),
        call("environment.line.lift", F::LineStopped, env_body),
    ]
}

fn plan() -> Value {
    json!({"stages": [{"selector": {"percentage": 100}, "bakeSeconds": 30, "gates": [{"healthWindow": {}}]}]})
}

impl Row {
    fn name(&self) -> String {
        match self.call {
            Call::Fn(endpoint) => endpoint.to_string(),
            Call::Route(method, path) => format!("{method} {path}"),
        }
    }
}

// --- callers ------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The fixtures' environment.
    Here,
    /// `*`.
    Everywhere,
    /// Another environment.
    Elsewhere,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Credential {
    Session,
    Token,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    Nobody,
    EdgeReader,
    Holder(Role, Place, Credential),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    SignInRequired,
    Forbidden,
    Allowed,
}

/// What `caller` must get from `row`.
fn expected(row: &Row, caller: Caller) -> Expect {
    let (role, place, credential) = match caller {
        Caller::Nobody => return Expect::SignInRequired,
        Caller::EdgeReader if row.scope == Scope::EdgeConfig => return Expect::Allowed,
        Caller::EdgeReader => return Expect::SignInRequired,
        Caller::Holder(role, place, credential) => (role, place, credential),
    };
    let held = match row.scope {
        Scope::Environment => (place != Place::Elsewhere).then_some(role),
        Scope::Everywhere | Scope::EdgeConfig => (place == Place::Everywhere).then_some(role),
        Scope::Anywhere | Scope::SignedIn => Some(role),
        Scope::Users => (credential == Credential::Session).then_some(role),
    };
    if held.is_some_and(|held| held >= row.need) {
        Expect::Allowed
    } else {
        Expect::Forbidden
    }
}

struct Client {
    caller: Caller,
    http: reqwest::Client,
}

/// Every caller: nobody, the edge-config token, and each role here, everywhere (both as a
/// signed-in user and as an API token), and an admin of another environment.
async fn callers(app: &TestApp, fx: &Fixtures) -> Vec<Client> {
    let mut out = vec![
        Client {
            caller: Caller::Nobody,
            http: browser(),
        },
        Client {
            caller: Caller::EdgeReader,
            http: client_with_token(EDGE_TOKEN),
        },
    ];
    let mut holders: Vec<(Role, Place)> = Vec::new();
    for place in [Place::Here, Place::Everywhere] {
        for role in Role::ALL {
            holders.push((role, place));
        }
    }
    holders.push((Role::Admin, Place::Elsewhere));
    for (role, place) in holders {
        let environment_id = match place {
            Place::Here => fx.env.as_str(),
            Place::Everywhere => "*",
            Place::Elsewhere => fx.other_env.as_str(),
        };
        let name = format!("{}-{place:?}", role.as_str()).to_lowercase();
        let session = app
            .signed_in_user(
                &format!("{name}@example.com"),
                &[grant(environment_id, role)],
            )
            .await;
        out.push(Client {
            caller: Caller::Holder(role, place, Credential::Session),
            http: browser_with_session(&session),
        });
        let (_, token) = accounts::create_api_token(
            &app.control.db,
            &operator(),
            &name,
            environment_id,
            TokenRole::Role(role),
            None,
            app.now(),
        )
        .await
        .unwrap();
        out.push(Client {
            caller: Caller::Holder(role, place, Credential::Token),
            http: client_with_token(&token.unwrap()),
        });
    }
    out
}

// --- fixtures -------------------------------------------------------------------------------

/// What the rows act on besides their fresh objects.
struct Fixtures {
    env: String,
    other_env: String,
    /// Deployed at v1, with a release in flight by [`AUTHOR`].
    pipeline: String,
    release: String,
    node: String,
}

async fn fixtures(app: &TestApp) -> Fixtures {
    let other = fleet::create_environment(&app.control.db, &operator(), "second", app.now())
        .await
        .unwrap();
    let node = app.enroll("edge-1", &[("tier", "edge")]).await.node_id;
    fleet::create_node_group(
        &app.control.db,
        &operator(),
        &app.env_id,
        "edges",
        labels(&[("tier", "edge")]),
        app.now(),
    )
    .await
    .unwrap();
    fleet::create_enrollment_token(
        &app.control.db,
        &operator(),
        &app.env_id,
        None,
        "spare",
        app.now(),
    )
    .await
    .unwrap();
    accounts::create_api_token(
        &app.control.db,
        &operator(),
        "automation",
        &app.env_id,
        TokenRole::Role(Role::Editor),
        None,
        app.now(),
    )
    .await
    .unwrap();
    app.create_user("bystander@example.com", &[grant(&app.env_id, Role::Viewer)])
        .await;
    let percent = rolling::parse_percent(&json!(50)).unwrap();
    rolling::apply(
        &app.control.db,
        &operator(),
        "fixture-rollout",
        rolling::Change::SetGlobal(percent),
        None,
        app.now(),
    )
    .await
    .unwrap();
    let pipeline = deployed_pipeline(app, "logs").await;
    let release = release_by_author(app, &pipeline, Some(plan()), None).await;
    Fixtures {
        env: app.env_id.clone(),
        other_env: other.id,
        pipeline,
        release,
        node,
    }
}

async fn deployed_pipeline(app: &TestApp, name: &str) -> String {
    let p = app.create_pipeline(name, &[]).await;
    app.deploy(&p.id, "v: 1\n").await;
    p.id
}

/// A release in flight on `pipeline_id`, created by [`AUTHOR`] (none of the callers).
async fn release_by_author(
    app: &TestApp,
    pipeline_id: &str,
    rollout_plan: Option<Value>,
    canary_selector: Option<Value>,
) -> String {
    let author = Actor {
        name: AUTHOR.to_string(),
        ip: None,
    };
    let request = CanaryRequest {
        pipeline_id: pipeline_id.to_string(),
        config_yaml: "v: 2\n".to_string(),
        changelog: "by someone else".to_string(),
        rollout_plan,
        canary_selector,
        ..CanaryRequest::default()
    };
    releases::create_canary(&app.control, &author, request)
        .await
        .unwrap()
        .id
}

/// Makes the object a row acts on; `n` makes names unique.
async fn make(app: &TestApp, fresh: Fresh, n: usize) -> Made {
    let name = format!("fresh-{n}");
    let db = &app.control.db;
    let now = app.now();
    let made = |id: String| Made {
        id,
        row_version: None,
    };
    match fresh {
        Fresh::Nothing => made(String::new()),
        Fresh::FreezeWindow => made(
            vf_control::freeze::create_freeze_window(
                db,
                &operator(),
                &app.env_id,
                "Sat 00:00 - Sun 00:00 UTC",
                None,
                now,
            )
            .await
            .unwrap()
            .id,
        ),
        Fresh::LineRunning | Fresh::LineStopped => {
            let hold = vf_control::freeze::hold_of(db, &app.env_id, now)
                .await
                .unwrap();
            let (ctl, env) = (&app.control, &app.env_id);
            match (fresh, hold.hold.line.is_some()) {
                (Fresh::LineRunning, true) => {
                    vf_control::freeze::lift_line(ctl, &operator(), env, None)
                        .await
                        .unwrap();
                }
                (Fresh::LineStopped, false) => {
                    vf_control::freeze::stop_line(ctl, &operator(), env, None)
                        .await
                        .unwrap();
                }
                _ => {}
            }
            made(String::new())
        }
        Fresh::Name => made(name),
        Fresh::Pipeline => made(deployed_pipeline(app, &name).await),
        Fresh::Release => {
            let p = deployed_pipeline(app, &name).await;
            made(release_by_author(app, &p, Some(plan()), None).await)
        }
        Fresh::PlanlessRelease => {
            let p = deployed_pipeline(app, &name).await;
            let selector = json!({"percentage": 100});
            made(release_by_author(app, &p, None, Some(selector)).await)
        }
        Fresh::Group => made(
            fleet::create_node_group(db, &operator(), &app.env_id, &name, labels(&[]), now)
                .await
                .unwrap()
                .id,
        ),
        Fresh::Node => made(app.enroll(&name, &[]).await.node_id),
        Fresh::Webhook | Fresh::WebhookDelivery => {
            let events = ["release.created".to_string()];
            let (hook, _) = vf_control::webhooks::create(
                db,
                &operator(),
                &app.env_id,
                "http://127.0.0.1:9/hook",
                &events,
                false,
                None,
                now,
            )
            .await
            .unwrap();
            if fresh == Fresh::Webhook {
                return made(hook.id);
            }
            sqlx::query(
                "INSERT INTO webhook_deliveries (id, webhook_id, event, body, status, created_at)
                 VALUES ($1, $2, 'release.created', '{}', 'delivered', $3)",
            )
            .bind(&name)
            .bind(&hook.id)
            .bind(now)
            .execute(&db.pool)
            .await
            .unwrap();
            made(name)
        }
        Fresh::EnrollmentToken => made(
            fleet::create_enrollment_token(db, &operator(), &app.env_id, None, &name, now)
                .await
                .unwrap()
                .0
                .id,
        ),
        Fresh::ApiToken => made(
            accounts::create_api_token(
                db,
                &operator(),
                &name,
                &app.env_id,
                TokenRole::Role(Role::Viewer),
                None,
                now,
            )
            .await
            .unwrap()
            .0
            .id,
        ),
        Fresh::User => made(
            app.create_user(
                &format!("{name}@example.com"),
                &[grant(&app.env_id, Role::Viewer)],
            )
            .await
            .id,
        ),
        Fresh::Rollout | Fresh::RolloutWithOrg => {
            let percent = rolling::parse_percent(&json!(30)).unwrap();
            let mut stored = rolling::apply(
                db,
                &operator(),
                &name,
                rolling::Change::SetGlobal(percent),
                None,
                now,
            )
            .await
            .unwrap();
            if fresh == Fresh::RolloutWithOrg {
                stored = rolling::apply(
                    db,
                    &operator(),
                    &name,
                    rolling::Change::SetOrg("acme".into(), percent),
                    Some(stored.row_version),
                    now,
                )
                .await
                .unwrap();
            }
            Made {
                id: name,
                row_version: Some(stored.row_version),
            }
        }
    }
}

async fn send(
    app: &TestApp,
    client: &reqwest::Client,
    row: &Row,
    body: Value,
    made: &Made,
) -> (u16, String) {
    let request = match row.call {
        Call::Fn(endpoint) => client
            .post(format!("{}/api/{endpoint}", app.url))
            .json(&body),
        Call::Route(method, path) => {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let url = format!("{}{}", app.url, path.replace("{id}", &made.id));
            let mut request = client.request(method.clone(), url);
            if method != Method::GET && method != Method::DELETE {
                request = request.json(&body);
            }
            if let Some(version) = made.row_version {
                request = request.header(IF_MATCH, format!("\"{version}\""));
            }
            request
        }
    };
    let resp = request.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The sequence number of the newest audit event (0: none).
async fn last_audit_seq(app: &TestApp) -> i64 {
    audit::list(&app.control.db, &AuditFilter::default(), 1)
        .await
        .unwrap()
        .first()
        .map(|e| e.seq)
        .unwrap_or(0)
}

/// Why a server function's successful call is not what its API description says: the body
/// the server took must be a valid request and the answer a valid result. `None` when both
/// are (or the call did not succeed).
fn wrong_answer(
    described: &mut Described,
    row: &Row,
    body: &Value,
    status: u16,
    text: &str,
) -> Option<Vec<String>> {
    let (Call::Fn(name), 200) = (row.call, status) else {
        return None;
    };
    let mut refusals = described.request_refusals(name, body);
    match serde_json::from_str::<Value>(text) {
        Ok(answer) => refusals.extend(described.result_refusals(name, &answer)),
        Err(e) => refusals.push(format!("not JSON ({e}): {text}")),
    };
    (!refusals.is_empty()).then_some(refusals)
}

#[tokio::test]
async fn every_server_function_and_admin_route_admits_exactly_the_roles_its_row_names() {
    let app = TestApp::spawn_with(vf_control::testing::TestDb::sqlite(), |c| {
        c.edge_config_token = Some(EDGE_TOKEN.to_string());
    })
    .await;
    let fx = fixtures(&app).await;
    let clients = callers(&app, &fx).await;
    let mut described = Described::new(app::api::openapi::document());
    let mut wrong = Vec::new();
    let mut n = 0;
    for row in table() {
        for client in &clients {
            n += 1;
            let made = make(&app, row.fresh, n).await;
            let body = (row.body)(&fx, &made);
            let before = last_audit_seq(&app).await;
            let sent = body.clone();
            let (status, text) = send(&app, &client.http, &row, body, &made).await;
            let expect = expected(&row, client.caller);
            let got = match status {
                401 => Expect::SignInRequired,
                403 => Expect::Forbidden,
                _ => Expect::Allowed,
            };
            let listed = match row.call {
                Call::Fn(name) => catalog::endpoint(name).map(|e| e.statuses()),
                Call::Route(..) => None,
            };
            if got != expect {
                wrong.push(format!(
                    "{} by {:?}: expected {expect:?}, got {status} {text}",
                    row.name(),
                    client.caller
                ));
            } else if let Some(refusals) = wrong_answer(&mut described, &row, &sent, status, &text)
            {
                wrong.push(format!(
                    "{} by {:?} answered what its API description does not describe: {}",
                    row.name(),
                    client.caller,
                    refusals.join("; ")
                ));
            } else if listed.as_ref().is_some_and(|l| !l.contains(&status)) {
                wrong.push(format!(
                    "{} by {:?} answered {status}, a status its API description does not list \
                     ({listed:?}): {text}",
                    row.name(),
                    client.caller
                ));
            } else if got != Expect::Allowed && last_audit_seq(&app).await != before {
                wrong.push(format!(
                    "{} by {:?} was refused with {status} but changed something (a new audit event)",
                    row.name(),
                    client.caller
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {n} calls were wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_registered_server_function_is_in_the_access_table() {
    let registered: BTreeSet<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path.trim_start_matches("/api/").to_string())
        .collect();
    let listed: BTreeSet<String> = table()
        .iter()
        .filter_map(|r| match r.call {
            Call::Fn(endpoint) => Some(endpoint.to_string()),
            Call::Route(..) => None,
        })
        .collect();
    assert!(
        registered.len() > 40,
        "the registry was read: {registered:?}"
    );
    let unlisted: Vec<_> = registered.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "server functions without a row saying who may call them: {unlisted:?}"
    );
    let unknown: Vec<_> = listed.difference(&registered).collect();
    assert!(
        unknown.is_empty(),
        "rows naming no server function: {unknown:?}"
    );
}

#[tokio::test]
async fn an_editor_rolls_back_their_own_release_but_only_an_admin_rolls_back_someone_elses() {
    let app = TestApp::spawn().await;
    app.enroll("edge-1", &[]).await;
    let editor = browser_with_session(
        &app.signed_in_user("ed@example.com", &[grant(&app.env_id, Role::Editor)])
            .await,
    );
    let admin = browser_with_session(
        &app.signed_in_user("ada@example.com", &[grant(&app.env_id, Role::Admin)])
            .await,
    );

    // Their own release: the page offers the rollback and it works.
    let own_pipeline = deployed_pipeline(&app, "own").await;
    let (status, created) = app
        .call_as(
            &editor,
            "release.canary.create",
            json!({"pipeline_id": own_pipeline, "config_yaml": "v: 2\n", "rollout_plan": plan()}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let own: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(own["created_by"], "ed@example.com");
    assert!(actions_of(&own).contains(&"rollback".to_string()), "{own}");
    let (status, body) = app
        .call_as(
            &editor,
            "release.canary.rollback",
            json!({"release_id": own["id"]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        app.release(own["id"].as_str().unwrap()).await["status"],
        "ROLLED_BACK"
    );

    // Someone else's: no rollback button for the editor, 403 if they try, the admin may.
    let other_pipeline = deployed_pipeline(&app, "theirs").await;
    let theirs = release_by_author(&app, &other_pipeline, Some(plan()), None).await;
    let (_, seen) = app
        .call_as(&editor, "release.canary.get", json!({"release_id": theirs}))
        .await;
    let seen: Value = serde_json::from_str(&seen).unwrap();
    let editor_actions = actions_of(&seen);
    assert!(!editor_actions.contains(&"rollback".to_string()), "{seen}");
    assert!(editor_actions.contains(&"complete".to_string()), "{seen}");
    let (status, refused) = app
        .call_as(
            &editor,
            "release.canary.rollback",
            json!({"release_id": theirs}),
        )
        .await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused.contains("this needs admin"), "{refused}");
    assert_eq!(app.release(&theirs).await["status"], "CANARY_DEPLOYED");
    let (_, seen) = app
        .call_as(&admin, "release.canary.get", json!({"release_id": theirs}))
        .await;
    let seen: Value = serde_json::from_str(&seen).unwrap();
    assert!(
        actions_of(&seen).contains(&"rollback".to_string()),
        "{seen}"
    );
    let (status, body) = app
        .call_as(
            &admin,
            "release.canary.rollback",
            json!({"release_id": theirs}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.release(&theirs).await["status"], "ROLLED_BACK");
}

fn actions_of(release: &Value) -> Vec<String> {
    release["allowed_actions"]
        .as_array()
        .unwrap_or_else(|| panic!("no allowed_actions in {release}"))
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}
