//! A thousand operator calls racing on one release over HTTP, in five rounds of 200 calls
//! all in flight at once, with scheduler ticks among them: advances while stages remain,
//! then rollback, complete and advance mixed on the last stage. Every transition is a
//! compare-and-set on the release row, so each step has exactly one winner: one 2xx answer
//! (or one acting tick) per round, the row version moves once for it (and once per
//! refusal recorded after it), the audit log holds exactly those, and every other call is
//! refused with 409 and a reason.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::task::JoinSet;
use vf_control::audit::AuditRow;
use vf_control::releases;

use crate::helpers::{TestApp, OPERATOR};
use crate::releases::{actions, wave};

const ROUNDS: usize = 5;
const CALLS_PER_ROUND: usize = 200;
/// Scheduler ticks among the calls of the rounds that have them.
const TICKS_PER_ROUND: usize = 4;
/// The rounds (1-based) whose calls race scheduler ticks too. A tick reaches the database
/// before any HTTP call does and wins those; the others are the operators' own races.
const ROUNDS_WITH_TICKS: [usize; 2] = [1, 3];
const WAVES: [&str; ROUNDS] = ["a", "b", "c", "d", "e"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Press {
    Advance,
    Complete,
    Rollback,
}

impl Press {
    /// Every call of the first four rounds advances; the last round (stage 5 open) mixes
    /// rollbacks, completes and advances.
    fn of(round: usize, i: usize) -> Press {
        if round + 1 < ROUNDS {
            return Press::Advance;
        }
        match i % 4 {
            0 => Press::Rollback,
            1 | 2 => Press::Complete,
            _ => Press::Advance,
        }
    }

    fn endpoint(self) -> &'static str {
        match self {
            Press::Advance => "release.canary.advance",
            Press::Complete => "release.canary.complete",
            Press::Rollback => "release.canary.rollback",
        }
    }

    /// The audit action a win records and the status it leads to.
    fn transition(self) -> (&'static str, &'static str) {
        match self {
            Press::Advance => ("release.advance", "CANARY_DEPLOYED"),
            Press::Complete => ("release.complete", "BROADENED"),
            Press::Rollback => ("release.rollback", "ROLLED_BACK"),
        }
    }
}

/// Why a call may be refused: it lost the race, the release had ended, its last stage was
/// open (an advance then has nowhere to go), or the stage it found had just opened and not
/// baked yet (recorded on the release, like every refusal by a gate).
const REASONS: [&str; 5] = [
    "the release changed meanwhile",
    "release is already complete",
    "release is already rolled back",
    "is the last stage; complete the release instead",
    "refused: healthWindow gate failed",
];

/// Every node reports clean traffic of v2 in the current minute, so error-rate gates pass.
async fn clean_traffic(app: &TestApp, pipeline_id: &str, tokens: &[String], total: i64) {
    let body = json!({ "pipelines": [{
        "pipelineId": pipeline_id, "version": 2, "status": "RUNNING",
        "eventsIn": total, "eventsOut": total, "errorsTotal": 0
    }]})
    .to_string();
    for token in tokens {
        let resp = app.post_heartbeat(token, body.clone()).await;
        assert_eq!(resp.status(), reqwest::StatusCode::OK);
    }
}

/// Every audit event of the release, oldest first (more than `release_audit`'s 50).
async fn audit_log(app: &TestApp, release_id: &str) -> Vec<AuditRow> {
    let mut rows =
        vf_control::testing::audit_for_target(&app.control.db, "release", release_id, 100_000)
            .await
            .unwrap();
    rows.reverse();
    rows
}

/// A pipeline at v1 on five nodes (waves a to e) and a five-stage release of v2, one wave
/// a stage, each gated on its bake and the error rate. Before each round the clock passes
/// the open stage's bake and every node reports clean traffic, so that stage's gates pass;
/// then 200 calls (and in two rounds 4 ticks) race. Each round has exactly one winner.
async fn racing_operator_calls_make_exactly_one_transition_per_step(app: TestApp) {
    let app = Arc::new(app);
    let pipeline = app.create_pipeline("logs", &[]).await;
    app.deploy(&pipeline.id, "v: 1\n").await;
    let mut tokens = Vec::new();
    for w in WAVES {
        let node = app.enroll(&format!("wave-{w}"), &[("wave", w)]).await;
        tokens.push(node.node_token);
    }
    let gates = json!([{"healthWindow": {}}, {"errorRate": {"maxPercent": 5}}]);
    let stages: Vec<Value> = WAVES.iter().map(|w| wave(w, gates.clone())).collect();
    let (id, created) = app
        .create_release(json!({
            "pipeline_id": pipeline.id,
            "config_yaml": "v: 2\n",
            "changelog": "the race",
            "rollout_plan": {"stages": stages},
        }))
        .await;
    let mut row_version = created["row_version"].as_i64().unwrap();
    let mut audited = audit_log(&app, &id).await.len();
    let started = Instant::now();

    for round in 0..ROUNDS {
        app.clock.advance_ms(30_000);
        clean_traffic(&app, &pipeline.id, &tokens, 1000 * (round as i64 + 1)).await;
        let mut calls = JoinSet::new();
        let mut ticks = JoinSet::new();
        for i in 0..CALLS_PER_ROUND {
            let (caller, id, press) = (app.clone(), id.clone(), Press::of(round, i));
            calls.spawn(async move {
                let answer = caller
                    .call(press.endpoint(), json!({ "release_id": id }))
                    .await;
                (press, answer)
            });
            if ROUNDS_WITH_TICKS.contains(&(round + 1))
                && i % (CALLS_PER_ROUND / TICKS_PER_ROUND) == 0
            {
                let (control, now) = (app.control.clone(), app.now());
                ticks.spawn(async move { releases::tick(&control, now).await.unwrap() });
            }
        }
        let mut answers = Vec::new();
        while let Some(answer) = calls.join_next().await {
            answers.push(answer.unwrap());
        }
        let mut tick_wins = Vec::new();
        let ticks_run = ticks.len();
        while let Some(outcomes) = ticks.join_next().await {
            tick_wins.extend(
                outcomes
                    .unwrap()
                    .into_iter()
                    .filter(|o| o.release_id == id && o.decision.as_str() != "lost-race")
                    .map(|o| format!("release.{}", o.decision.as_str())),
            );
        }
        let context = format!("round {}", round + 1);

        // Every call is answered 200 or refused with 409 and a reason; nothing else.
        let mut wins: Vec<(Press, Value)> = Vec::new();
        let mut recorded_refusals = 0;
        for (press, (status, body)) in &answers {
            match status {
                200 => wins.push((*press, serde_json::from_str(body).unwrap())),
                409 => {
                    let reason = body.strip_prefix("ServerError|").unwrap_or_default();
                    assert!(
                        REASONS.iter().any(|r| reason.contains(r)),
                        "{context}: {press:?}: {body}"
                    );
                    if reason.starts_with("refused:") {
                        recorded_refusals += 1;
                    }
                }
                _ => panic!("{context}: {press:?}: {status} {body}"),
            }
        }

        // Exactly one winner, a call or a tick, and its answer shows what it did.
        assert_eq!(
            wins.len() + tick_wins.len(),
            1,
            "{context}: calls won {:?}, ticks won {tick_wins:?}",
            wins.iter()
                .map(|(p, r)| (p, &r["row_version"]))
                .collect::<Vec<_>>()
        );
        let (transition, by) = match wins.first() {
            Some((press, release)) => {
                assert_eq!(release["status"], press.transition().1, "{context}");
                assert_eq!(release["row_version"], row_version + 1, "{context}");
                (press.transition().0.to_string(), OPERATOR)
            }
            None => (tick_wins[0].clone(), "scheduler"),
        };

        // The row moved once for the winner and once per refusal recorded after it; the
        // audit log holds exactly those, the winner first.
        let release = app.release(&id).await;
        let now_version = release["row_version"].as_i64().unwrap();
        assert_eq!(
            now_version - row_version,
            1 + recorded_refusals,
            "{context}"
        );
        row_version = now_version;
        let log = audit_log(&app, &id).await;
        let new = &log[audited..];
        audited = log.len();
        assert_eq!(
            (new[0].action.as_str(), new[0].actor.as_str()),
            (transition.as_str(), by),
            "{context}"
        );
        assert_eq!(
            new.len() - 1,
            usize::try_from(recorded_refusals).unwrap(),
            "{context}"
        );
        assert!(
            new[1..].iter().all(|r| r.action == "release.refused"),
            "{context}: {:?}",
            actions(new)
        );
        println!(
            "{context}: {} calls and {} ticks, {transition} by {by}, \
             {recorded_refusals} refusals recorded, {:?} so far",
            answers.len(),
            ticks_run,
            started.elapsed()
        );

        // Until the last round the release moves one stage on; the last one ends it.
        if round + 1 < ROUNDS {
            assert_eq!(transition, "release.advance", "{context}");
            assert_eq!(release["current_stage"], round + 1, "{context}");
            assert_eq!(release["status"], "CANARY_DEPLOYED", "{context}");
        } else {
            match transition.as_str() {
                "release.complete" => {
                    assert_eq!(release["status"], "BROADENED");
                    assert_eq!(app.deployed_version(&pipeline.id).await, Some(2));
                }
                "release.rollback" => {
                    assert_eq!(release["status"], "ROLLED_BACK");
                    assert_eq!(app.deployed_version(&pipeline.id).await, Some(3));
                    assert_eq!(app.versions(&pipeline.id).await[2].1, "v: 1\n");
                }
                other => panic!("the last round ended with {other}"),
            }
        }
    }
    // Once it ended, every button is refused saying so, and nothing more is recorded.
    let ended = app.release(&id).await;
    let word = match ended["status"].as_str() {
        Some("BROADENED") => "release is already complete",
        _ => "release is already rolled back",
    };
    for press in [Press::Advance, Press::Complete, Press::Rollback] {
        let reason = app
            .call_refused(press.endpoint(), json!({ "release_id": id }), 409)
            .await;
        assert_eq!(reason, word, "{press:?}");
    }
    assert_eq!(app.release(&id).await["row_version"], ended["row_version"]);
    assert_eq!(audit_log(&app, &id).await.len(), audited);
    println!(
        "{} racing calls and {} ticks in {:?}",
        ROUNDS * CALLS_PER_ROUND,
        ROUNDS_WITH_TICKS.len() * TICKS_PER_ROUND,
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_racing_operator_calls_make_exactly_one_transition_per_step() {
    racing_operator_calls_make_exactly_one_transition_per_step(TestApp::spawn().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_racing_operator_calls_make_exactly_one_transition_per_step_on_postgres() {
    racing_operator_calls_make_exactly_one_transition_per_step(TestApp::spawn_postgres().await)
        .await;
}
