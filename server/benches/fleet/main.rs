//! `make bench`: the fleet-scale figures of docs/benchmarks.md, in one process run, each
//! against baselines measured in the same run (a bare axum handler and the server's own
//! `/healthz`), because the machine is shared and noisy. Every timed load is run three
//! times and the median is reported, and so is every pipeline view (three calls). Speed
//! targets live in docs/benchmarks.md, never in tests.
//!
//! Knobs (environment): `BENCH_NODES` (10000), `BENCH_BIG_NODES` (100000), `BENCH_SECS`
//! per run (5), `BENCH_CONNECTIONS` (32), `BENCH_DUE_RELEASES` (1000), `BENCH_OUT`
//! (docs/benchmarks.md), `VF_TEST_POSTGRES_URL` (the PostgreSQL rows; skipped without it),
//! `BENCH_PUSH_AGENTS` (1000) and `BENCH_PUSH_POLL_SECS` (30) for the push rows, `BENCH_ONLY`
//! (`polls`, `fleet`, `scheduler` or `push`: one part, e.g. to profile it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fleet;
mod load;
mod push;
mod report;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use vf_control::testing::TestDb;

use fleet::{Fleet, Stage};
use load::{get, median, post_json, run, Run};
use report::{Report, Row};

struct Knobs {
    nodes: usize,
    big_nodes: usize,
    secs: u64,
    connections: usize,
    due_releases: usize,
}

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a whole number"))
        })
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let knobs = Knobs {
        nodes: knob("BENCH_NODES", 10_000),
        big_nodes: knob("BENCH_BIG_NODES", 100_000),
        secs: knob("BENCH_SECS", 5) as u64,
        connections: knob("BENCH_CONNECTIONS", 32),
        due_releases: knob("BENCH_DUE_RELEASES", 1_000),
    };
    let mut report = Report::new(&knobs.describe());

    let only = std::env::var("BENCH_ONLY").ok();
    let runs = |part: &str| only.as_deref().is_none_or(|o| o == part);
    // The 100,000-node fleets first: their memory rows are the process's resident size, and
    // every server a section starts keeps running to the end of the process.
    if runs("fleet") {
        big_fleet(&knobs, &mut report, "SQLite", TestDb::sqlite()).await;
        if std::env::var("VF_TEST_POSTGRES_URL").is_ok() {
            big_fleet(&knobs, &mut report, "PostgreSQL", TestDb::postgres().await).await;
        } else {
            report.note("PostgreSQL rows skipped: VF_TEST_POSTGRES_URL is not set.");
        }
    }
    if runs("polls") {
        polls(&knobs, &mut report, "SQLite", TestDb::sqlite()).await;
        if std::env::var("VF_TEST_POSTGRES_URL").is_ok() {
            polls(&knobs, &mut report, "PostgreSQL", TestDb::postgres().await).await;
        }
    }
    if runs("scheduler") {
        scheduler(&knobs, &mut report).await;
    }
    if runs("push") {
        rollback_reach(&mut report).await;
    }

    let out = std::env::var("BENCH_OUT").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/benchmarks.md").to_string()
    });
    report.write(&out);
    println!("{}", report.markdown());
    println!("written to {out}");
}

impl Knobs {
    fn describe(&self) -> String {
        format!(
            "{} nodes for the poll rows, {} for the fleet-size rows; {} s per run, 3 runs, \
             median; pipeline views: median of 3 calls; {} keep-alive connections; {} \
             releases due at once",
            self.nodes, self.big_nodes, self.secs, self.connections, self.due_releases
        )
    }

    fn duration(&self) -> Duration {
        Duration::from_secs(self.secs)
    }
}

/// Three runs of one load; the median.
async fn measure(
    knobs: &Knobs,
    addr: std::net::SocketAddr,
    requests: Vec<Vec<u8>>,
    expect: u16,
) -> Run {
    let requests = Arc::new(requests);
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(
            run(
                addr,
                knobs.connections,
                knobs.duration(),
                requests.clone(),
                expect,
            )
            .await,
        );
    }
    let m = median(runs);
    assert_eq!(m.unexpected, 0, "answers other than {expect}: {m:?}");
    m
}

/// The config poll at `BENCH_NODES` nodes with a release in flight, against a bare axum
/// handler and the server's `/healthz`.
async fn polls(knobs: &Knobs, report: &mut Report, database: &str, db: TestDb) {
    let bare = fleet::bare_axum().await;
    let fleet = Fleet::start(db, knobs.nodes).await;
    fleet.release(Stage::Percent(10)).await;

    let bare_run = measure(knobs, bare, vec![get("/", "")], 200).await;
    let health = measure(knobs, fleet.addr, vec![get("/healthz", "")], 200).await;
    let poll_304 = fleet.poll_304(knobs, &fleet.tokens).await;
    let full = fleet
        .tokens
        .iter()
        .map(|t| {
            get(
                "/api/agent/config",
                &format!("Authorization: Bearer {t}\r\n"),
            )
        })
        .collect();
    let poll_200 = measure(knobs, fleet.addr, full, 200).await;
    let heartbeat = json!({"pipelines": [{
        "pipelineId": fleet.pipeline_id, "version": 1, "status": "RUNNING",
        "eventsIn": 1000, "eventsOut": 1000, "errorsTotal": 0
    }]})
    .to_string();
    let posts = fleet
        .tokens
        .iter()
        .map(|t| {
            post_json(
                "/api/agent/config",
                &format!("Authorization: Bearer {t}\r\n"),
                &heartbeat,
            )
        })
        .collect();
    let poll_post = measure(knobs, fleet.addr, posts, 200).await;

    let section = format!(
        "Config polls, {} nodes, a release in flight (10 % stage), {database}",
        knobs.nodes
    );
    for (name, r) in [
        ("bare axum handler", bare_run),
        ("server `/healthz`", health),
        ("GET config, 304", poll_304),
        ("GET config, full body", poll_200),
        ("POST config with a heartbeat", poll_post),
    ] {
        report.row(&section, Row::load(name, r, health.per_sec));
    }
}

/// Release creation and advance at `BENCH_BIG_NODES`, the poll rate at each stage, the
/// pipeline views, and the server's memory.
async fn big_fleet(knobs: &Knobs, report: &mut Report, database: &str, db: TestDb) {
    let section = format!("{} nodes, {database}", knobs.big_nodes);
    let fleet = Fleet::start(db, knobs.big_nodes).await;
    // The poll rows use a sample of nodes: fetching every node's ETag first would take
    // longer than the measurement.
    let sample: Vec<String> = fleet
        .tokens
        .iter()
        .step_by((knobs.big_nodes / 2_000).max(1))
        .cloned()
        .collect();
    let health = measure(knobs, fleet.addr, vec![get("/healthz", "")], 200).await;
    report.row(
        &section,
        Row::load("server `/healthz`", health, health.per_sec),
    );

    let started = Instant::now();
    let release_id = fleet.release(Stage::Percent(10)).await;
    report.row(
        &section,
        Row::timed("`release.canary.create`, 10 % stage", started.elapsed()),
    );
    let poll_10 = fleet.poll_304(knobs, &sample).await;
    report.row(
        &section,
        Row::load("GET config 304, at 10 %", poll_10, health.per_sec),
    );

    let started = Instant::now();
    fleet.advance(&release_id).await;
    report.row(
        &section,
        Row::timed("advance to the 50 % stage", started.elapsed()),
    );
    let poll_50 = fleet.poll_304(knobs, &sample).await;
    report.row(
        &section,
        Row::load("GET config 304, at 50 %", poll_50, health.per_sec),
    );

    let (elapsed, bytes) = fleet.pipeline_get().await;
    report.row(&section, Row::sized("`pipeline.get`", elapsed, bytes));
    let (elapsed, bytes) = fleet.pipeline_page().await;
    report.row(
        &section,
        Row::sized("pipeline page (`/pipelines/<id>`)", elapsed, bytes),
    );
    report.row(
        &section,
        Row::memory(
            "bench process RSS (this server, database cache, load client, and the servers \
             of earlier sections), right after the page",
            fleet::rss_bytes(),
            fleet::rss_file_bytes(),
        ),
    );
    // The allocator hands freed memory back within about a second (.cargo/config.toml).
    tokio::time::sleep(Duration::from_secs(3)).await;
    report.row(
        &section,
        Row::memory(
            "the same, 3 s later (idle)",
            fleet::rss_bytes(),
            fleet::rss_file_bytes(),
        ),
    );
}

/// One scheduler tick with `BENCH_DUE_RELEASES` releases due at the same moment.
async fn scheduler(knobs: &Knobs, report: &mut Report) {
    let fleet = Fleet::start(TestDb::sqlite(), 10).await;
    fleet.due_releases(knobs.due_releases).await;
    let started = Instant::now();
    let decided = fleet.tick().await;
    let elapsed = started.elapsed();
    assert_eq!(decided, knobs.due_releases, "every due release decided");
    report.row(
        "Scheduler, SQLite",
        Row::timed(
            &format!("one tick, {} releases due at once", knobs.due_releases),
            elapsed,
        ),
    );
}

/// How long a rollback takes to reach every agent, with and without the push stream: the
/// median of 3 runs each.
async fn rollback_reach(report: &mut Report) {
    let agents = knob("BENCH_PUSH_AGENTS", 1_000);
    let every = Duration::from_secs(knob("BENCH_PUSH_POLL_SECS", 30) as u64);
    let section = format!(
        "Rollback reach, {agents} agents polling every {} s, SQLite",
        every.as_secs()
    );
    for push in [true, false] {
        let mut runs = Vec::new();
        for _ in 0..3 {
            runs.push(push::rollback_reach(agents, every, push).await);
        }
        runs.sort();
        let name = if push {
            "until every agent fetched the reverted version, with push"
        } else {
            "the same, polling only (baseline)"
        };
        report.row(&section, Row::timed(name, runs[1]));
    }
}
