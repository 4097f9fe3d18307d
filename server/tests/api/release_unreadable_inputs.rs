//! A release whose gate inputs cannot be read (here: a corrupt per-minute rollup) is not
//! retried silently on every tick: the scheduler holds it with a reason naming the input,
//! `/metrics` counts it, the log carries the cause chain, and operator actions answer 409
//! with the reason, never 500. Rollback still works.

use serde_json::json;

use crate::helpers::{LogCapture, TestApp};
use crate::releases::{poll_twice, two_waves_on_v1, wave};

#[tokio::test(flavor = "current_thread")]
async fn a_release_whose_throughput_cannot_be_read_is_held_with_the_reason_and_the_cause_is_logged()
{
    let logs = LogCapture::start();
    let app = TestApp::spawn().await;
    let (mut a, mut b, p) = two_waves_on_v1(&app).await;
    let gates = json!([{"healthWindow": {}}, {"throughputDrop": {"maxDropPercent": 50}}]);
    let (id, _) = app
        .create_release(json!({
            "pipeline_id": p.id,
            "config_yaml": "v: 2\n",
            "changelog": "v2",
            "rollout_plan": {"stages": [wave("a", gates.clone()), wave("b", gates)]},
        }))
        .await;
    poll_twice(&mut [&mut a, &mut b]).await;

    // Rollup rows the database can no longer read as numbers (SQLite keeps what it is given).
    let corrupted =
        sqlx::query("UPDATE pipeline_metrics SET events_in = 'garbage' WHERE pipeline_id = $1")
            .bind(&p.id)
            .execute(&app.control.db.pool)
            .await
            .unwrap();
    assert!(corrupted.rows_affected() > 0);

    assert_eq!(app.decide_after(30_000).await, "hold");
    let r = app.release(&id).await;
    assert_eq!(r["status"], "HEALTH_CHECK");
    let reason = r["hold_reason"].as_str().unwrap();
    assert!(
        reason.contains("pipeline's throughput since the stage started could not be read"),
        "{reason}"
    );
    assert!(
        reason.contains(&id),
        "the reason says what to search the log for: {reason}"
    );
    // Held, so nothing is due: the next tick does not try again.
    assert!(app.tick_after(5_000).await.is_empty());

    let log = logs.text();
    assert!(
        log.contains(&format!(
            "reading pipeline_metrics.events_in of pipeline {}",
            p.id
        )),
        "the log names the query: {log}"
    );
    assert!(
        log.contains("decod"),
        "the log has the database's own words: {log}"
    );
    assert!(log.contains(&id), "the log names the release: {log}");

    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("vectorflow_gate_input_errors_total{input=\"throughput\"} 1"),
        "{metrics}"
    );

    for action in ["advance", "complete"] {
        let refused = app
            .call_refused(
                &format!("release.canary.{action}"),
                json!({ "release_id": id }),
                409,
            )
            .await;
        assert!(
            refused.contains("throughput since the stage started could not be read"),
            "{action}: {refused}"
        );
    }
    assert_eq!(app.release(&id).await["status"], "HEALTH_CHECK");

    let rolled_back = app.press("rollback", &id).await;
    assert_eq!(rolled_back["status"], "ROLLED_BACK");
}
