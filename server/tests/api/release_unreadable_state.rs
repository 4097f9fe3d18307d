//! A release whose stored state no longer parses (here: its `stages` JSON) is never read as
//! a default. Every reader names it and says what follows: fencing serves every node the
//! previous version, the scheduler leaves it alone, the rollout view and `release.canary.get`
//! show "release state unreadable", operator actions but rollback answer 409. Each read is
//! counted in `/metrics` by field and reader and logged at error level. Rollback still works,
//! so an operator can unblock the pipeline without repairing the row.

use serde_json::json;

use crate::helpers::{LogCapture, TestApp};
use crate::releases::{actions, details, poll_all, served, two_waves_on_v1, wave};

async fn metric(app: &TestApp, reader: &str) -> u64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    let series = format!(
        "vectorflow_release_state_unreadable_total{{field=\"stages\",reader=\"{reader}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0)
}

async fn a_corrupt_release_is_named_by_every_reader_and_can_still_be_rolled_back(app: TestApp) {
    let logs = LogCapture::start();
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let gates = json!([{"healthWindow": {}}]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "changelog": "v2",
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates)]},
        }))
        .await;
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(2), Some(1)]);

    // Written as every writer of release rows must write: with the row version bumped, since
    // fencing keeps a release's parsed targets per row version. The trigger bumps the fleet
    // generation; a write outside the server's own paths tells the SQLite mirror.
    let corrupted = sqlx::query(
        "UPDATE releases SET stages = '{not json', row_version = row_version + 1 WHERE id = $1",
    )
    .bind(&id)
    .execute(&app.control.db.pool)
    .await
    .unwrap();
    assert_eq!(corrupted.rows_affected(), 1);
    app.control.db.refresh_generation().await.unwrap();

    // Fencing: the targeted set cannot be read, so every node gets the previous version.
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(1), Some(1)]);
    assert!(metric(&app, "fencing").await >= 1);
    let log = logs.text();
    let fenced = log
        .lines()
        .find(|l| l.contains("fencing serves every node of the pipeline its previous version"))
        .unwrap_or_else(|| panic!("fencing says what it serves: {log}"));
    for expected in ["ERROR", "release state unreadable", &id, "field=\"stages\""] {
        assert!(fenced.contains(expected), "{expected} in {fenced}");
    }

    // The view: what could be read, the reason, and Rollback as the only way out.
    let view = app.release(&id).await;
    let shown = view["unreadable"].as_str().unwrap();
    assert!(
        shown.starts_with("release state unreadable: stages: "),
        "{shown}"
    );
    assert_eq!(view["status"], "CANARY_DEPLOYED");
    assert_eq!(view["allowed_actions"], json!(["rollback"]));
    assert!(metric(&app, "view").await >= 1);
    let page = app
        .get(&format!("/pipelines/{}", p.id))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("release state unreadable: stages: "),
        "the rollout page says so"
    );

    // The scheduler cannot judge it: nothing is decided when the bake ends.
    assert!(app.tick_after(31_000).await.is_empty());
    assert!(metric(&app, "scheduler").await >= 1);
    assert!(logs
        .text()
        .contains("the scheduler cannot judge it; it stays in flight, fenced"));

    // Actions that need the state are refused, naming the release and the field; so is a new
    // release of the pipeline while this one is in flight.
    for action in ["advance", "complete"] {
        let refused = app
            .call_refused(
                &format!("release.canary.{action}"),
                json!({ "release_id": id }),
                409,
            )
            .await;
        assert!(
            refused.contains(&format!("release {id} state is unreadable: stored stages")),
            "{action}: {refused}"
        );
    }
    assert!(metric(&app, "action").await >= 2);
    let blocked = app
        .call_refused(
            "release.canary.create",
            json!({"pipeline_id": p.id, "config_yaml": "v: 3\n", "changelog": "v3",
                   "rollout_plan": {"stages": [wave("a", json!([{"healthWindow": {}}]))]}}),
            409,
        )
        .await;
    assert!(blocked.contains("a release is in flight"), "{blocked}");

    // Rollback works: v1's config comes back as v3 and every node converges on it.
    let rolled_back = app.press("rollback", &id).await;
    assert_eq!(rolled_back["status"], "ROLLED_BACK");
    assert_eq!(rolled_back["allowed_actions"], json!([]));
    assert!(rolled_back["unreadable"]
        .as_str()
        .unwrap()
        .starts_with("release state unreadable: stages: "));
    let failure = rolled_back["failure_reason"].as_str().unwrap();
    assert!(
        failure.contains("while its state was unreadable (stages: "),
        "{failure}"
    );
    assert_eq!(app.deployed_version(&p.id).await, Some(3));
    assert_eq!(app.versions(&p.id).await[2], (3, "v: 1\n".to_string()));
    poll_all(&mut [&mut a, &mut b]).await;
    assert_eq!(served(&[&a, &b], &p.id), [Some(3), Some(3)]);

    let trail = app.release_audit(&id).await;
    assert_eq!(actions(&trail), ["release.create", "release.rollback"]);
    let rollback = details(&trail[1]);
    assert_eq!(rollback["unreadable"]["field"], "stages");
    assert_eq!(rollback["revertedVersion"], 3);
    let chain = vf_control::audit::verify(&app.control.db).await.unwrap();
    assert!(
        chain.broken.is_none(),
        "the audit chain verifies: {chain:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_corrupt_release_is_named_by_every_reader_and_can_still_be_rolled_back_on_sqlite() {
    a_corrupt_release_is_named_by_every_reader_and_can_still_be_rolled_back(TestApp::spawn().await)
        .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_corrupt_release_is_named_by_every_reader_and_can_still_be_rolled_back_on_postgres() {
    a_corrupt_release_is_named_by_every_reader_and_can_still_be_rolled_back(
        TestApp::spawn_postgres().await,
    )
    .await;
}
