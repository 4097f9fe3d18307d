//! Accounts on SQLite and PostgreSQL: a user signs in and holds exactly the roles granted,
//! sessions end when they should, the last admin cannot be locked out, the setup link works
//! once, and API tokens authenticate until revoked.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use vf_control::access::{self, Grant, Role, Target, ALL_ENVIRONMENTS};
use vf_control::accounts::{self, TokenRole};
use vf_control::audit;
use vf_control::testing::TestDb;
use vf_control::{fleet, Actor, Control, ControlError, ManualClock, Settings};

const T0: i64 = 1_700_000_000_000;
const HOUR: i64 = 60 * 60 * 1000;
const PASSWORD: &str = "correct horse battery";

fn grant(environment_id: &str, role: Role) -> Grant {
    Grant {
        environment_id: environment_id.into(),
        role,
    }
}

async fn control(db: &TestDb) -> (Control, ManualClock) {
    let clock = ManualClock::new(T0);
    let settings = Settings {
        session_ttl_ms: 12 * HOUR,
        ..Settings::default()
    };
    (
        Control::new(db.connect().await, Arc::new(clock.clone()), settings),
        clock,
    )
}

async fn accounts_story(db: TestDb) {
    let (ctl, clock) = control(&db).await;
    let admin = Actor::system("system");
    let staging = fleet::create_environment(&ctl.db, &admin, "staging", T0)
        .await
        .unwrap();
    let prod = fleet::create_environment(&ctl.db, &admin, "prod", T0)
        .await
        .unwrap();

    // The first admin, then an editor of staging only.
    assert!(
        accounts::bootstrap_admin(&ctl.db, "root@example.com", PASSWORD, T0)
            .await
            .unwrap()
    );
    assert!(
        !accounts::bootstrap_admin(&ctl.db, "other@example.com", PASSWORD, T0)
            .await
            .unwrap()
    );
    let ann = accounts::create_user(
        &ctl.db,
        &admin,
        "Ann@Example.com",
        PASSWORD,
        &[grant(&staging.id, Role::Editor)],
        T0,
    )
    .await
    .unwrap();
    assert_eq!(ann.email, "ann@example.com");
    let stored: String = sqlx::query_scalar("SELECT password_hash FROM users WHERE id = $1")
        .bind(&ann.id)
        .fetch_one(&ctl.db.pool)
        .await
        .unwrap();
    assert!(stored.starts_with("$argon2id$"));

    // Signing in gives a principal with exactly the granted roles.
    let session = accounts::sign_in(&ctl, "ann@example.com", PASSWORD, Some("10.0.0.7"))
        .await
        .unwrap();
    let who = accounts::authenticate(
        &ctl.db,
        Some(&session.token),
        None,
        Some("10.0.0.7"),
        ctl.now(),
    )
    .await
    .unwrap()
    .principal
    .unwrap();
    assert_eq!(who.name(), "ann@example.com");
    assert_eq!(who.role_in(&staging.id), Some(Role::Editor));
    assert_eq!(who.role_in(&prod.id), None);
    let granted = access::authorize(
        &ctl.db,
        Some(&who),
        Role::Editor,
        Target::Environment(&staging.id),
    )
    .await
    .unwrap();
    assert_eq!(granted.actor.ip.as_deref(), Some("10.0.0.7"));
    let refused = access::authorize(
        &ctl.db,
        Some(&who),
        Role::Viewer,
        Target::Environment(&prod.id),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.status_code(), 403);
    assert_eq!(
        refused.to_string(),
        "you have no role in its environment; this needs viewer"
    );
    let too_low = access::authorize(
        &ctl.db,
        Some(&who),
        Role::Admin,
        Target::Environment(&staging.id),
    )
    .await
    .unwrap_err();
    assert_eq!(
        too_low.to_string(),
        "your role in environment staging is editor; this needs admin"
    );

    // The session ends at its expiry, and at once when the user is disabled.
    clock.advance_ms(12 * HOUR);
    let expired = accounts::authenticate(&ctl.db, Some(&session.token), None, None, ctl.now())
        .await
        .unwrap();
    assert_eq!(expired.principal, None);
    let fresh = accounts::sign_in(&ctl, "ann@example.com", PASSWORD, None)
        .await
        .unwrap();
    accounts::set_disabled(&ctl.db, &admin, &ann.id, true, ctl.now())
        .await
        .unwrap();
    let disabled = accounts::authenticate(&ctl.db, Some(&fresh.token), None, None, ctl.now())
        .await
        .unwrap();
    assert_eq!(disabled.principal, None);
    assert!(accounts::sign_in(&ctl, "ann@example.com", PASSWORD, None)
        .await
        .is_err());

    // The last admin of every environment can be neither demoted nor disabled.
    let root = accounts::list_users(&ctl.db)
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.email == "root@example.com")
        .unwrap();
    let demote = accounts::set_grants(
        &ctl.db,
        &admin,
        &root.id,
        &[grant("*", Role::Viewer)],
        ctl.now(),
    )
    .await
    .unwrap_err();
    assert_eq!(demote.status_code(), 400);
    assert!(
        accounts::set_disabled(&ctl.db, &admin, &root.id, true, ctl.now())
            .await
            .is_err()
    );

    // API tokens: one role in one place, until revoked.
    let (row, token) = accounts::create_api_token(
        &ctl.db,
        &admin,
        "ci",
        &staging.id,
        TokenRole::Role(Role::Editor),
        None,
        ctl.now(),
    )
    .await
    .unwrap();
    let token = token.unwrap();
    assert!(token.starts_with("vfa_") && row.prefix.len() < token.len());
    let ci = accounts::authenticate(&ctl.db, None, Some(&token), None, ctl.now())
        .await
        .unwrap()
        .principal
        .unwrap();
    assert_eq!(ci.name(), "token:ci");
    assert_eq!(ci.role_in(&staging.id), Some(Role::Editor));
    assert_eq!(ci.global_role(), None);
    accounts::revoke_api_token(&ctl.db, &admin, &row.id, ctl.now())
        .await
        .unwrap();
    let revoked = accounts::authenticate(&ctl.db, None, Some(&token), None, ctl.now())
        .await
        .unwrap();
    assert_eq!(revoked.principal, None);

    // An edge-config token reads the edge config and is nobody anywhere else.
    let (_, edge) = accounts::create_api_token(
        &ctl.db,
        &admin,
        "edge",
        ALL_ENVIRONMENTS,
        TokenRole::EdgeConfig,
        None,
        ctl.now(),
    )
    .await
    .unwrap();
    let edge = accounts::authenticate(&ctl.db, None, Some(&edge.unwrap()), None, ctl.now())
        .await
        .unwrap();
    assert!(edge.edge_reader);
    assert_eq!(edge.principal, None);
}

async fn setup_link_works_once(db: TestDb) {
    let (ctl, _clock) = control(&db).await;
    let token = accounts::prepare_setup(&ctl.db, ctl.now())
        .await
        .unwrap()
        .unwrap();
    let refused = accounts::complete_setup(
        &ctl.db,
        "vfu_wrong",
        "a@example.com",
        PASSWORD,
        None,
        ctl.now(),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.status_code(), 400);
    let first =
        accounts::complete_setup(&ctl.db, &token, "a@example.com", PASSWORD, None, ctl.now())
            .await
            .unwrap();
    assert_eq!(first.grants, vec![grant("*", Role::Admin)]);
    assert!(
        accounts::complete_setup(&ctl.db, &token, "b@example.com", PASSWORD, None, ctl.now())
            .await
            .is_err(),
        "the link works once"
    );
    assert_eq!(
        accounts::prepare_setup(&ctl.db, ctl.now()).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn accounts_hold_their_roles_and_sessions_end_on_sqlite() {
    accounts_story(TestDb::sqlite()).await;
}

#[tokio::test]
async fn accounts_hold_their_roles_and_sessions_end_on_postgres() {
    accounts_story(TestDb::postgres().await).await;
}

#[tokio::test]
async fn the_setup_link_creates_one_admin_once_on_sqlite() {
    setup_link_works_once(TestDb::sqlite()).await;
}

#[tokio::test]
async fn the_setup_link_creates_one_admin_once_on_postgres() {
    setup_link_works_once(TestDb::postgres().await).await;
}

async fn tokens_never_outrank_their_creator(db: TestDb) {
    let (ctl, _clock) = control(&db).await;
    let system = Actor::system("system");
    let staging = fleet::create_environment(&ctl.db, &system, "staging", T0)
        .await
        .unwrap();
    accounts::bootstrap_admin(&ctl.db, "root@example.com", PASSWORD, T0)
        .await
        .unwrap();
    let bob = accounts::create_user(
        &ctl.db,
        &system,
        "bob@example.com",
        PASSWORD,
        &[grant(&staging.id, Role::Admin)],
        T0,
    )
    .await
    .unwrap();
    let as_bob = Actor::system("bob@example.com");
    let mint = |name: &'static str, role: Role| {
        let (db, actor, env) = (&ctl.db, &as_bob, staging.id.clone());
        async move {
            accounts::create_api_token(db, actor, name, &env, TokenRole::Role(role), None, T0)
                .await
                .unwrap()
                .1
                .unwrap()
        }
    };
    let admin_token = mint("bob-admin", Role::Admin).await;
    let viewer_token = mint("bob-viewer", Role::Viewer).await;
    let alive = |token: String| {
        let db = &ctl.db;
        async move {
            accounts::authenticate(db, None, Some(&token), None, T0)
                .await
                .unwrap()
                .principal
                .is_some()
        }
    };

    // Demoted to editor: the admin token goes, the viewer token stays.
    accounts::set_grants(
        &ctl.db,
        &system,
        &bob.id,
        &[grant(&staging.id, Role::Editor)],
        T0,
    )
    .await
    .unwrap();
    assert!(!alive(admin_token).await);
    assert!(alive(viewer_token.clone()).await);

    // Disabled: everything Bob minted stops working.
    accounts::set_disabled(&ctl.db, &system, &bob.id, true, T0)
        .await
        .unwrap();
    assert!(!alive(viewer_token).await);

    // A token name is one actor: taken names are refused, even once revoked.
    let again = accounts::create_api_token(
        &ctl.db,
        &system,
        "bob-viewer",
        &staging.id,
        TokenRole::Role(Role::Viewer),
        None,
        T0,
    )
    .await
    .unwrap_err();
    assert_eq!(again.status_code(), 409);
}

async fn a_bootstrap_variable_with_a_new_value_rotates_its_token(db: TestDb) {
    let (ctl, _clock) = control(&db).await;
    let system = Actor::system("system");
    let register = |value: &'static str| {
        let (db, actor) = (&ctl.db, &system);
        async move {
            accounts::create_api_token(
                db,
                actor,
                "bootstrap",
                ALL_ENVIRONMENTS,
                TokenRole::Role(Role::Admin),
                Some(value),
                T0,
            )
            .await
            .unwrap()
            .0
        }
    };
    let first = register("first-bootstrap-value-0001").await;
    assert_eq!(
        first.prefix, "(from a variable)",
        "none of a chosen value is shown"
    );
    assert_eq!(
        register("first-bootstrap-value-0001").await.id,
        first.id,
        "idempotent"
    );
    register("second-bootstrap-value-0002").await;
    let works = |token: &'static str| {
        let db = &ctl.db;
        async move {
            accounts::authenticate(db, None, Some(token), None, T0)
                .await
                .unwrap()
                .principal
                .is_some()
        }
    };
    assert!(
        !works("first-bootstrap-value-0001").await,
        "the old value is revoked"
    );
    assert!(works("second-bootstrap-value-0002").await);
}

async fn two_admins_demoting_each_other_at_once_leave_one_admin(db: TestDb) {
    let (ctl, _clock) = control(&db).await;
    let system = Actor::system("system");
    let make = |email: &'static str| {
        let (db, actor) = (&ctl.db, &system);
        async move {
            accounts::create_user(db, actor, email, PASSWORD, &[grant("*", Role::Admin)], T0)
                .await
                .unwrap()
        }
    };
    let (a, b) = (make("a@example.com").await, make("b@example.com").await);
    let demote = |id: String| {
        let (db, actor) = (&ctl.db, &system);
        async move { accounts::set_grants(db, actor, &id, &[grant("*", Role::Viewer)], T0).await }
    };
    let (ra, rb) = tokio::join!(demote(a.id.clone()), demote(b.id.clone()));
    assert_eq!(
        usize::from(ra.is_ok()) + usize::from(rb.is_ok()),
        1,
        "exactly one demotion wins: {ra:?} {rb:?}"
    );
    let admins = accounts::list_users(&ctl.db)
        .await
        .unwrap()
        .into_iter()
        .filter(|u| u.grants.contains(&grant("*", Role::Admin)))
        .count();
    assert_eq!(admins, 1);
}

/// How many `action` entries the log holds about one object.
async fn entries(db: &vf_control::Db, kind: &str, id: &str, action: &str) -> usize {
    vf_control::testing::audit_for_target(db, kind, id, 100)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.action == action)
        .count()
}

async fn revoking_twice_changes_and_records_nothing_the_second_time(db: TestDb) {
    let (ctl, _clock) = control(&db).await;
    let system = Actor::system("system");
    let staging = fleet::create_environment(&ctl.db, &system, "staging", T0)
        .await
        .unwrap();
    let mint = |name: &'static str| {
        let (db, actor, env) = (&ctl.db, &system, staging.id.clone());
        async move {
            accounts::create_api_token(
                db,
                actor,
                name,
                &env,
                TokenRole::Role(Role::Viewer),
                None,
                T0,
            )
            .await
            .unwrap()
            .0
        }
    };
    let stamp_of = |id: String| {
        let db = &ctl.db;
        async move {
            accounts::list_api_tokens(db)
                .await
                .unwrap()
                .into_iter()
                .find(|t| t.id == id)
                .unwrap()
                .revoked_at
        }
    };

    // One after the other: the second is 409 and the first stamp stays.
    let ci = mint("ci").await;
    let first = accounts::revoke_api_token(&ctl.db, &system, &ci.id, T0 + 1)
        .await
        .unwrap();
    assert_eq!(first.revoked_at, Some(T0 + 1));
    let again = accounts::revoke_api_token(&ctl.db, &system, &ci.id, T0 + 2).await;
    assert!(matches!(again, Err(ControlError::Conflict(_))), "{again:?}");
    assert_eq!(stamp_of(ci.id.clone()).await, Some(T0 + 1));
    assert_eq!(
        entries(&ctl.db, "api_token", &ci.id, "api_token.revoke").await,
        1
    );
    let unknown = accounts::revoke_api_token(&ctl.db, &system, "no-such-token", T0 + 2).await;
    assert!(
        matches!(unknown, Err(ControlError::NotFound(_))),
        "{unknown:?}"
    );

    // At once (two admins, or two replicas): exactly one wins, once.
    let racer = mint("racer").await;
    let (a, b) = tokio::join!(
        accounts::revoke_api_token(&ctl.db, &system, &racer.id, T0 + 3),
        accounts::revoke_api_token(&ctl.db, &system, &racer.id, T0 + 4),
    );
    assert_eq!(u8::from(a.is_ok()) + u8::from(b.is_ok()), 1, "{a:?} {b:?}");
    let lost = if a.is_ok() { b } else { a };
    assert!(matches!(lost, Err(ControlError::Conflict(_))), "{lost:?}");
    assert!(matches!(stamp_of(racer.id.clone()).await, Some(t) if t == T0 + 3 || t == T0 + 4));
    assert_eq!(
        entries(&ctl.db, "api_token", &racer.id, "api_token.revoke").await,
        1
    );

    // The enrollment token and the user answer alike.
    let (enroll, _) =
        fleet::create_enrollment_token(&ctl.db, &system, &staging.id, None, "edge", T0)
            .await
            .unwrap();
    fleet::revoke_enrollment_token(&ctl.db, &system, &enroll.id, T0 + 1)
        .await
        .unwrap();
    let again = fleet::revoke_enrollment_token(&ctl.db, &system, &enroll.id, T0 + 2).await;
    assert!(matches!(again, Err(ControlError::Conflict(_))), "{again:?}");
    let listed = fleet::list_enrollment_tokens(&ctl.db, &staging.id)
        .await
        .unwrap();
    assert_eq!(listed[0].revoked_at, Some(T0 + 1));
    assert_eq!(
        entries(
            &ctl.db,
            "enrollment_token",
            &enroll.id,
            "enrollment_token.revoke"
        )
        .await,
        1
    );

    let ann = accounts::create_user(&ctl.db, &system, "ann@example.com", PASSWORD, &[], T0)
        .await
        .unwrap();
    let disabled = accounts::set_disabled(&ctl.db, &system, &ann.id, true, T0 + 1)
        .await
        .unwrap();
    assert_eq!(disabled.disabled_at, Some(T0 + 1));
    let again = accounts::set_disabled(&ctl.db, &system, &ann.id, true, T0 + 2).await;
    assert!(matches!(again, Err(ControlError::Conflict(_))), "{again:?}");
    assert_eq!(entries(&ctl.db, "user", &ann.id, "user.disable").await, 1);
    accounts::set_disabled(&ctl.db, &system, &ann.id, false, T0 + 3)
        .await
        .unwrap();
    let again = accounts::set_disabled(&ctl.db, &system, &ann.id, false, T0 + 4).await;
    assert!(matches!(again, Err(ControlError::Conflict(_))), "{again:?}");
    assert_eq!(entries(&ctl.db, "user", &ann.id, "user.enable").await, 1);

    assert_eq!(audit::verify(&ctl.db).await.unwrap().broken, None);
}

#[tokio::test]
async fn revoking_twice_changes_and_records_nothing_the_second_time_on_sqlite() {
    revoking_twice_changes_and_records_nothing_the_second_time(TestDb::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_twice_changes_and_records_nothing_the_second_time_on_postgres() {
    revoking_twice_changes_and_records_nothing_the_second_time(TestDb::postgres().await).await;
}

#[tokio::test]
async fn tokens_never_outrank_their_creator_on_sqlite() {
    tokens_never_outrank_their_creator(TestDb::sqlite()).await;
}

#[tokio::test]
async fn tokens_never_outrank_their_creator_on_postgres() {
    tokens_never_outrank_their_creator(TestDb::postgres().await).await;
}

#[tokio::test]
async fn a_bootstrap_variable_with_a_new_value_rotates_its_token_on_sqlite() {
    a_bootstrap_variable_with_a_new_value_rotates_its_token(TestDb::sqlite()).await;
}

#[tokio::test]
async fn a_bootstrap_variable_with_a_new_value_rotates_its_token_on_postgres() {
    a_bootstrap_variable_with_a_new_value_rotates_its_token(TestDb::postgres().await).await;
}

#[tokio::test]
async fn two_admins_demoting_each_other_at_once_leave_one_admin_on_sqlite() {
    two_admins_demoting_each_other_at_once_leave_one_admin(TestDb::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_admins_demoting_each_other_at_once_leave_one_admin_on_postgres() {
    // A race: run it often enough that, without the lock, both demotions would win.
    for _ in 0..10 {
        two_admins_demoting_each_other_at_once_leave_one_admin(TestDb::postgres().await).await;
    }
}

/// Two replicas starting together on one database register the same bootstrap values at the
/// same moment: both starts succeed and each value is registered once.
async fn replicas_starting_together_register_each_bootstrap_token_once(db: TestDb) {
    let (a, _) = control(&db).await;
    let (b, _) = control(&db).await;
    let system = Actor::system("system");
    let env = fleet::ensure_environment(&a.db, "prod", T0).await.unwrap();
    let start = |ctl: &Control| {
        let (ctl, system, env_id) = (ctl.clone(), system.clone(), env.id.clone());
        tokio::spawn(async move {
            let api = accounts::create_api_token(
                &ctl.db,
                &system,
                "bootstrap",
                ALL_ENVIRONMENTS,
                TokenRole::Role(Role::Admin),
                Some("vfa_racing-bootstrap-value-01"),
                T0,
            )
            .await
            .map(|(row, _)| row.id);
            let enrollment = fleet::create_enrollment_token(
                &ctl.db,
                &system,
                &env_id,
                Some("vfe_racing-bootstrap-value-01"),
                "bootstrap",
                T0,
            )
            .await
            .map(|(row, _)| row.id);
            (api, enrollment)
        })
    };
    let (first, second) = (start(&a), start(&b));
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(first.0.unwrap(), second.0.unwrap(), "one API token row");
    assert_eq!(
        first.1.unwrap(),
        second.1.unwrap(),
        "one enrollment token row"
    );
    assert_eq!(accounts::list_api_tokens(&a.db).await.unwrap().len(), 1);
}

#[tokio::test]
async fn replicas_starting_together_register_each_bootstrap_token_once_on_sqlite() {
    replicas_starting_together_register_each_bootstrap_token_once(TestDb::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_register_each_bootstrap_token_once_on_postgres() {
    // A race: run it often enough that, without the re-read, one start would fail.
    for _ in 0..10 {
        replicas_starting_together_register_each_bootstrap_token_once(TestDb::postgres().await)
            .await;
    }
}
