//! Prints the figures: markdown tables for people (they paste into docs/soak.md as is), or
//! one JSON document with `--json`.

use std::fmt::Write;

use serde::Serialize;

use super::figures::Figures;

/// The run's settings, printed above the figures.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub server: String,
    pub agents: usize,
    pub interval_ms: u64,
    pub duration_secs: u64,
    pub error_percent: f64,
    pub events_per_sec: u64,
    pub release_at_secs: Option<u64>,
    pub bake_secs: u64,
}

/// Everything one soak produced.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub settings: Settings,
    pub figures: Figures,
    /// The release's final status (`BROADENED`, `CANARY_DEPLOYED`...), or why there is none.
    pub release: String,
}

fn secs(ms: i64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

pub fn markdown(report: &Report) -> String {
    let s = &report.settings;
    let f = &report.figures;
    let mut out = String::new();
    let rate = f.requests as f64 / s.duration_secs.max(1) as f64;
    let _ = writeln!(
        out,
        "Soak: {} agents polling every {} ms for {} s, error rate {} %, release at {}.\n",
        s.agents,
        s.interval_ms,
        s.duration_secs,
        s.error_percent,
        s.release_at_secs
            .map_or("never".to_string(), |t| format!("{t} s")),
    );
    let _ = writeln!(out, "| Figure | Value |\n|---|---|");
    let mut row = |name: &str, value: String| {
        let _ = writeln!(out, "| {name} | {value} |");
    };
    row("requests", format!("{} ({rate:.0}/s)", f.requests));
    for (status, count) in &f.answers {
        row(&format!("answers {status}"), count.to_string());
    }
    match &f.latency_ms {
        Some(l) => row(
            "latency p50 / p90 / p99 / max",
            format!(
                "{:.1} / {:.1} / {:.1} / {:.1} ms",
                l.p50, l.p90, l.p99, l.max
            ),
        ),
        None => row("latency", "no answers".into()),
    }
    row(
        "agents never served the pipeline",
        f.never_served.to_string(),
    );
    row(
        "agents starved (> 3 intervals without a config answer)",
        format!("{} (longest gap {})", f.starved, secs(f.worst_gap_ms)),
    );
    row(
        "fencing violations (canary before its stage)",
        f.fencing_violations.to_string(),
    );
    row(
        "backwards steps (canary, then previous)",
        f.backwards_steps.to_string(),
    );
    row("vanished pipelines", f.vanished.to_string());
    row("release at the end", report.release.clone());
    if !f.transitions.is_empty() {
        let _ = writeln!(
            out,
            "\n| Transition | At | Nodes moving | Visible after | All on their version after | Late (> 1 interval after visible) | Never |\n|---|---|---|---|---|---|---|"
        );
        for t in &f.transitions {
            let _ = writeln!(
                out,
                "| {} | {:.1} s | {} | {} | {} | {} | {} |",
                t.label,
                t.at_s,
                t.moving,
                secs(t.visible_after_ms),
                t.all_on_version_ms.map_or(
                    format!("not within the {} watched", secs(t.observed_ms)),
                    secs
                ),
                t.late,
                t.never
            );
        }
    }
    out
}
