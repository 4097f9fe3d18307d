//! A server built in-process on a fresh database with a manual clock, a fleet of nodes
//! inserted in bulk (enrolling 100,000 nodes one request at a time would take longer than
//! everything measured), one pipeline, and the operations the bench times.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use vf_control::ids::token_hash;
use vf_control::pipelines;
use vf_control::releases::{self, CanaryRequest};
use vf_control::testing::TestDb;
use vf_control::{fleet, Actor, Clock, Control, ManualClock};
use vf_rules::Action;

use crate::load::{get, Conn, Run};
use crate::Knobs;

const API_TOKEN: &str = "vfa_bench-admin-api-token-000000";
const START_MS: i64 = 1_700_000_040_000;

/// A config body of a realistic size (about 2 KB).
fn pipeline_config(version: u32) -> String {
    let mut yaml = format!("# bench pipeline v{version}\nsources:\n");
    for i in 0..20 {
        yaml.push_str(&format!(
            "  file_{i}:\n    type: file\n    include: [\"/var/log/app-{i}/*.log\"]\n    read_from: end\n"
        ));
    }
    yaml.push_str("sinks:\n  out:\n    type: blackhole\n    inputs: [\"file_*\"]\n");
    yaml
}

pub enum Stage {
    Percent(u32),
}

pub struct Fleet {
    pub addr: SocketAddr,
    pub url: String,
    pub control: Control,
    pub clock: ManualClock,
    pub env_id: String,
    pub pipeline_id: String,
    pub tokens: Vec<String>,
    _db: TestDb,
}

fn actor() -> Actor {
    Actor::system("bench")
}

impl Fleet {
    /// The server on `db` with `nodes` nodes and a pipeline deployed at v1 to all of them.
    pub async fn start(db: TestDb, nodes: usize) -> Fleet {
        let clock = ManualClock::new(START_MS);
        let mut config = vf_server::Config::for_tests(&db.url);
        config.bootstrap_environment = Some("bench".into());
        config.bootstrap_api_token = Some(API_TOKEN.into());
        let app = vf_server::build_with_clock(config, Arc::new(clock.clone()))
            .await
            .expect("build the server");
        let control = app.control.clone();
        let addr = app.addr;
        let url = app.spawn();
        let env_id = fleet::list_environments(&control.db)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.name == "bench")
            .unwrap()
            .id;
        let tokens = insert_nodes(&control, &env_id, nodes).await;
        let p = pipelines::create_pipeline(
            &control.db,
            &actor(),
            &env_id,
            "bench-logs",
            Default::default(),
            clock.now_ms(),
        )
        .await
        .unwrap();
        pipelines::deploy(
            &control.db,
            &actor(),
            &p.id,
            &pipeline_config(1),
            "v1",
            clock.now_ms(),
        )
        .await
        .unwrap();
        insert_reports(&control, &env_id, &p.id).await;
        if control.db.dialect == vf_control::db::Dialect::Sqlite {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&control.db.pool)
                .await
                .unwrap();
        }
        Fleet {
            addr,
            url,
            control,
            clock,
            env_id,
            pipeline_id: p.id,
            tokens,
            _db: db,
        }
    }

    /// Starts a three-stage release (the given stage first, then 50 %, then 100 %).
    pub async fn release(&self, first: Stage) -> String {
        let Stage::Percent(p) = first;
        let stage = |percent: u32| {
            json!({"selector": {"percentage": percent}, "bakeSeconds": 30,
                   "gates": [{"healthWindow": {}}]})
        };
        // The bench's nodes report no pipeline: proof of apply is off, as delivery is measured.
        let plan = json!({"stages": [stage(p), stage(50), stage(100)], "autoAdvance": false,
                          "minAppliedPercent": 0});
        releases::create_canary(
            &self.control,
            &actor(),
            CanaryRequest {
                pipeline_id: self.pipeline_id.clone(),
                config_yaml: pipeline_config(2),
                changelog: "v2".into(),
                rollout_plan: Some(plan),
                canary_selector: None,
                health_check_window_minutes: None,
                release_id: None,
                freeze_override: None,
            },
        )
        .await
        .unwrap()
        .id
    }

    /// After the bake, the operator's "Advance next stage".
    pub async fn advance(&self, release_id: &str) {
        self.clock.advance_ms(31_000);
        releases::act(&self.control, &actor(), release_id, Action::Advance)
            .await
            .unwrap()
            .expect("the release reads");
    }

    /// The operator's "Roll back".
    pub async fn rollback(&self, release_id: &str) {
        releases::act(&self.control, &actor(), release_id, Action::Rollback)
            .await
            .unwrap()
            .expect("the release reads");
    }

    /// Each token's current ETag.
    pub async fn etags(&self, tokens: &[String]) -> Vec<String> {
        let mut conn = Conn::open(self.addr).await;
        let mut etags = Vec::with_capacity(tokens.len());
        for t in tokens {
            let answer = conn
                .send(&get(
                    "/api/agent/config",
                    &format!("Authorization: Bearer {t}\r\n"),
                ))
                .await;
            assert_eq!(answer.status, 200);
            etags.push(answer.header("etag").expect("an ETag").to_string());
        }
        etags
    }

    /// The 304 poll rate over `tokens`, each with its current ETag.
    pub async fn poll_304(&self, knobs: &Knobs, tokens: &[String]) -> Run {
        let etags = self.etags(tokens).await;
        let requests = tokens
            .iter()
            .zip(&etags)
            .map(|(t, e)| {
                get(
                    "/api/agent/config",
                    &format!("Authorization: Bearer {t}\r\nIf-None-Match: {e}\r\n"),
                )
            })
            .collect();
        crate::measure(knobs, self.addr, requests, 304).await
    }

    /// `pipeline.get` as automation calls it: the median time of three calls, and the
    /// answer's size.
    pub async fn pipeline_get(&self) -> (Duration, usize) {
        timed(|| {
            reqwest::Client::new()
                .post(format!("{}/api/pipeline.get", self.url))
                .json(&json!({ "id": self.pipeline_id }))
        })
        .await
    }

    /// The pipeline page, server-rendered: the median time of three loads, and its size.
    pub async fn pipeline_page(&self) -> (Duration, usize) {
        timed(|| reqwest::Client::new().get(format!("{}/pipelines/{}", self.url, self.pipeline_id)))
            .await
    }

    /// `count` more pipelines, each with a one-stage release whose bake has ended.
    pub async fn due_releases(&self, count: usize) {
        let stage = json!({"stages": [{"selector": {"percentage": 50}, "bakeSeconds": 30,
                                       "gates": [{"healthWindow": {}}]}],
                           "minAppliedPercent": 0});
        for i in 0..count {
            let p = pipelines::create_pipeline(
                &self.control.db,
                &actor(),
                &self.env_id,
                &format!("due-{i}"),
                Default::default(),
                self.clock.now_ms(),
            )
            .await
            .unwrap();
            pipelines::deploy(
                &self.control.db,
                &actor(),
                &p.id,
                "v: 1\n",
                "v1",
                self.clock.now_ms(),
            )
            .await
            .unwrap();
            releases::create_canary(
                &self.control,
                &actor(),
                CanaryRequest {
                    pipeline_id: p.id,
                    config_yaml: "v: 2\n".into(),
                    changelog: "v2".into(),
                    rollout_plan: Some(stage.clone()),
                    canary_selector: None,
                    health_check_window_minutes: None,
                    release_id: None,
                    freeze_override: None,
                },
            )
            .await
            .unwrap();
        }
        self.clock.advance_ms(31_000);
    }

    /// One scheduler step; how many releases it decided.
    pub async fn tick(&self) -> usize {
        releases::tick(&self.control, self.clock.now_ms())
            .await
            .unwrap()
            .iter()
            .filter(|o| matches!(o.decision, releases::Ticked::Decided(_)))
            .count()
    }
}

/// Sends the request three times, one after another, as the admin, reading each whole
/// answer (which must be 200): the median time, and how many bytes the last one brought.
async fn timed(request: impl Fn() -> reqwest::RequestBuilder) -> (Duration, usize) {
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..3 {
        let started = Instant::now();
        let resp = request().bearer_auth(API_TOKEN).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        size = resp.bytes().await.unwrap().len();
        times.push(started.elapsed());
    }
    times.sort();
    (times[1], size)
}

/// Inserts `count` vf-agent nodes straight into the table, 500 a statement; returns their
/// node tokens.
async fn insert_nodes(control: &Control, env_id: &str, count: usize) -> Vec<String> {
    let tokens: Vec<String> = (0..count)
        .map(|i| format!("vfn_bench-node-token-{i:08}"))
        .collect();
    let mut tx = control.db.pool.begin().await.unwrap();
    for (chunk_index, chunk) in tokens.chunks(500).enumerate() {
        let values = (0..chunk.len())
            .map(|i| {
                let b = i * 5;
                format!(
                    "(${}, ${}, 'vf-agent', ${}, ${}, '{{\"zone\":\"a\"}}', ${}, 5000, {START_MS}, {START_MS})",
                    b + 1,
                    b + 2,
                    b + 3,
                    b + 4,
                    b + 5
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO nodes (id, environment_id, kind, name, hostname, reported_labels,
                token_hash, poll_interval_ms, enrolled_at, last_seen_at) VALUES {values}"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (i, token) in chunk.iter().enumerate() {
            let n = chunk_index * 500 + i;
            let name = format!("edge-{n:06}");
            query = query
                .bind(format!("node-{n:08}"))
                .bind(env_id.to_string())
                .bind(name.clone())
                .bind(name)
                .bind(token_hash(token));
        }
        query.execute(&mut *tx).await.unwrap();
    }
    tx.commit().await.unwrap();
    tokens
}

/// Every node's report of the pipeline, as a heartbeat leaves it (the views read them all).
async fn insert_reports(control: &Control, env_id: &str, pipeline_id: &str) {
    sqlx::query(
        "INSERT INTO node_pipeline_status (node_id, pipeline_id, version, status, events_in,
            events_out, errors_total, uptime_seconds, pid, config_checksum, updated_at)
         SELECT id, $1, 1, 'RUNNING', 120000, 119000, 3, 3600, 4242, 'sha256:bench', $3
         FROM nodes WHERE environment_id = $2",
    )
    .bind(pipeline_id)
    .bind(env_id)
    .bind(START_MS)
    .execute(&control.db.pool)
    .await
    .unwrap();
}

/// A bare axum handler on its own port: the ceiling of this machine's HTTP stack.
pub async fn bare_axum() -> SocketAddr {
    let router = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// This process's resident memory (`VmRSS`).
pub fn rss_bytes() -> u64 {
    status_kb("VmRSS:") * 1024
}

/// The part of [`rss_bytes`] that maps files (SQLite readers map the database file: page
/// cache, shared and reclaimable).
pub fn rss_file_bytes() -> u64 {
    status_kb("RssFile:") * 1024
}

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
}
