//! vf-soak: a simulated fleet against a running server, for a chosen duration, with a
//! progressive release to v2 in the middle; prints what the fleet saw (docs/soak.md).
//!
//! It enrolls N nodes, deploys a pipeline at v1 to them, lets every node poll
//! `POST /api/agent/config` like vf-agent does, starts a 10 % / 50 % / 100 % release at
//! `--release-at-secs`, follows the release row, and at the end compares every answer every
//! node got with what its stage allowed at that moment.

#[path = "vf_soak/api.rs"]
mod api;
#[path = "vf_soak/figures.rs"]
mod figures;
#[path = "vf_soak/node.rs"]
mod node;
#[path = "vf_soak/report.rs"]
mod report;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use serde_json::json;
use vf_agent::ServerClient;

use api::{Admin, Release};
use figures::Window;
use node::{Fleet, Served};
use report::{Report, Settings};

/// A soak of the agent config path: a simulated fleet, a release mid-run, the figures.
#[derive(Debug, Parser)]
#[command(name = "vf-soak", version)]
struct Options {
    /// Control plane base URL.
    #[arg(long, env = "VF_SOAK_SERVER")]
    server: String,
    /// Environment enrollment token the nodes enroll with.
    #[arg(long, env = "VF_SOAK_ENROLLMENT_TOKEN")]
    enrollment_token: String,
    /// Admin API token (`Authorization: Bearer`) for the server functions.
    #[arg(long, env = "VF_SOAK_API_TOKEN")]
    api_token: String,
    /// Simulated nodes.
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// How often each node polls.
    #[arg(long, default_value_t = 5000)]
    interval_ms: u64,
    /// How long the fleet polls.
    #[arg(long, default_value_t = 120)]
    duration_secs: u64,
    /// Share of events each node reports as errors.
    #[arg(long, default_value_t = 0.5)]
    error_percent: f64,
    /// Events each node reports per second of uptime.
    #[arg(long, default_value_t = 100)]
    events_per_sec: u64,
    /// When the release to v2 starts (default: a third of the duration).
    #[arg(long)]
    release_at_secs: Option<u64>,
    /// Bake of each of the three stages (30 at least).
    #[arg(long, default_value_t = 30)]
    bake_secs: u64,
    /// One JSON document instead of tables.
    #[arg(long)]
    json: bool,
}

const ENROLL_CONCURRENCY: usize = 16;
const RELEASE_READ_EVERY: Duration = Duration::from_secs(1);

fn config_yaml(version: u32) -> String {
    format!(
        "# vf-soak pipeline, version {version}\nsources:\n  soak:\n    type: demo_logs\n    format: json\nsinks:\n  out:\n    type: blackhole\n    inputs: [soak]\n"
    )
}

#[tokio::main]
async fn main() -> Result<()> {
    let o = Options::parse();
    if o.agents == 0 || o.interval_ms < 100 || o.duration_secs == 0 {
        bail!(
            "--agents must be at least 1, --interval-ms at least 100, --duration-secs at least 1"
        );
    }
    if !(0.0..=100.0).contains(&o.error_percent) {
        bail!("--error-percent must be between 0 and 100");
    }
    let base = o.server.trim_end_matches('/').to_string();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("vf-soak/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("building the HTTP client")?;
    let agents = ServerClient::new(&base).context("building the agent-route client")?;
    let run_id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);

    eprintln!("vf-soak {run_id}: enrolling {} agents at {base}", o.agents);
    let nodes: Vec<node::Node> = futures::stream::iter(0..o.agents)
        .map(|i| {
            let labels = BTreeMap::from([
                ("soak".to_string(), "yes".to_string()),
                ("soak-run".to_string(), run_id.clone()),
                (
                    "zone".to_string(),
                    if i % 2 == 0 { "a" } else { "b" }.to_string(),
                ),
            ]);
            let hostname = format!("soak-{run_id}-{i}");
            node::enroll(&agents, &o.enrollment_token, hostname, labels)
        })
        .buffer_unordered(ENROLL_CONCURRENCY)
        .try_collect()
        .await?;
    let environment_id = nodes
        .first()
        .map(|n| n.environment_id.clone())
        .context("no node enrolled")?;

    let admin = Admin::new(http.clone(), &base, &o.api_token);
    let selector = json!({ "soak-run": run_id });
    let pipeline = admin
        .create_pipeline(&environment_id, &format!("soak-{run_id}"), selector)
        .await?;
    let v1 = admin.deploy(&pipeline.id, &config_yaml(1)).await?;

    let start = Instant::now();
    let start_ms = node::now_ms();
    let deadline = start + Duration::from_secs(o.duration_secs);
    let fleet = Arc::new(Fleet {
        client: agents,
        pipeline_id: pipeline.id.clone(),
        interval: Duration::from_millis(o.interval_ms),
        deadline,
        events_per_sec: o.events_per_sec,
        error_percent: o.error_percent,
    });
    eprintln!(
        "vf-soak {run_id}: pipeline {} at v{}; fleet polling for {} s",
        pipeline.id, v1.version, o.duration_secs
    );
    let tasks: Vec<_> = nodes
        .into_iter()
        .map(|n| tokio::spawn(node::run(fleet.clone(), n)))
        .collect();

    let release_at = o.release_at_secs.unwrap_or(o.duration_secs / 3);
    let release_id = if release_at < o.duration_secs {
        let at = start + Duration::from_secs(release_at);
        Some(drive_release(&admin, &pipeline.id, at, deadline, o.bake_secs, start).await)
    } else {
        None
    };

    let mut runs = Vec::with_capacity(tasks.len());
    for task in tasks {
        runs.push(task.await.context("a node task failed")?);
    }

    let (release, release_status) = match release_id {
        None => (None, "none (release at or after the end)".to_string()),
        Some(Err(e)) => (None, format!("not created: {e:#}")),
        Some(Ok(id)) => {
            let r = admin.release(&id).await?;
            let status = if r.in_flight() {
                format!(
                    "{} (stage {} of {})",
                    r.status,
                    r.current_stage + 1,
                    r.stage_count
                )
            } else {
                r.status.clone()
            };
            (Some(r), status)
        }
    };
    let deployed_after = match &release {
        Some(r) if r.status == "ROLLED_BACK" => {
            admin
                .deployed_version(&environment_id, &pipeline.id)
                .await?
        }
        _ => None,
    };
    let transitions = release
        .as_ref()
        .map(|r| figures::transitions(r, deployed_after))
        .unwrap_or_default();
    let window = Window {
        start_ms,
        end_ms: start_ms + (o.duration_secs * 1000) as i64,
        interval_ms: o.interval_ms as i64,
    };
    let report = Report {
        settings: Settings {
            server: base,
            agents: o.agents,
            interval_ms: o.interval_ms,
            duration_secs: o.duration_secs,
            error_percent: o.error_percent,
            events_per_sec: o.events_per_sec,
            release_at_secs: (release_at < o.duration_secs).then_some(release_at),
            bake_secs: o.bake_secs,
        },
        figures: figures::compute(
            &runs,
            window,
            Served::Version(v1.version),
            &transitions,
            release.as_ref(),
        ),
        release: release_status,
    };
    if o.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report::markdown(&report));
    }
    Ok(())
}

/// Starts the release at `at`, then reads its row every second until it leaves flight or
/// the run ends, logging each transition. Answers the release id.
async fn drive_release(
    admin: &Admin,
    pipeline_id: &str,
    at: Instant,
    deadline: Instant,
    bake_secs: u64,
    start: Instant,
) -> Result<String> {
    tokio::time::sleep_until(at.into()).await;
    let mut last = admin
        .create_release(pipeline_id, &config_yaml(2), api::soak_plan(bake_secs))
        .await?;
    log_release(&last, start);
    while last.in_flight() && Instant::now() + RELEASE_READ_EVERY < deadline {
        tokio::time::sleep(RELEASE_READ_EVERY).await;
        match admin.release(&last.id).await {
            Ok(r) => {
                if r.row_version != last.row_version {
                    log_release(&r, start);
                }
                last = r;
            }
            Err(e) => eprintln!("vf-soak: reading the release failed: {e:#}"),
        }
    }
    Ok(last.id)
}

fn log_release(r: &Release, start: Instant) {
    let targets: usize = r.stages.iter().map(|s| s.node_ids.len()).sum();
    eprintln!(
        "vf-soak [+{:.1} s]: release {} {} stage {} of {} ({targets} nodes targeted)",
        start.elapsed().as_secs_f64(),
        r.id,
        r.status,
        r.current_stage + 1,
        r.stage_count
    );
}
