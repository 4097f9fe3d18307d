//! The figures as a markdown table with the machine and the command, written to
//! docs/benchmarks.md (the targets beside them are issue 12's).

use std::time::Duration;

use crate::load::Run;

/// One line of the table.
pub struct Row {
    name: String,
    figure: String,
    ratio: String,
    latency: String,
}

impl Row {
    /// A load: requests per second, its ratio to `/healthz` of the same run, latencies.
    pub fn load(name: &str, r: Run, healthz_per_sec: f64) -> Row {
        Row {
            name: name.to_string(),
            figure: format!("{:.0} req/s", r.per_sec),
            ratio: format!("{:.2}x", r.per_sec / healthz_per_sec),
            latency: format!("{:.2} / {:.2} ms", r.p50_ms, r.p99_ms),
        }
    }

    /// One timed operation.
    pub fn timed(name: &str, elapsed: Duration) -> Row {
        Row {
            name: name.to_string(),
            figure: format!("{:.0} ms", elapsed.as_secs_f64() * 1000.0),
            ratio: String::new(),
            latency: String::new(),
        }
    }

    /// One timed answer and its size.
    pub fn sized(name: &str, elapsed: Duration, bytes: usize) -> Row {
        Row {
            name: name.to_string(),
            figure: format!(
                "{:.0} ms, {:.1} KB",
                elapsed.as_secs_f64() * 1000.0,
                bytes as f64 / 1024.0
            ),
            ratio: String::new(),
            latency: String::new(),
        }
    }

    /// Resident memory, and the part of it that maps files.
    pub fn memory(name: &str, bytes: u64, file_bytes: u64) -> Row {
        let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
        Row {
            name: name.to_string(),
            figure: format!(
                "{:.0} MB ({:.0} MB of it mapped files)",
                mb(bytes),
                mb(file_bytes)
            ),
            ratio: String::new(),
            latency: String::new(),
        }
    }
}

pub struct Report {
    settings: String,
    sections: Vec<(String, Vec<Row>)>,
    notes: Vec<String>,
}

impl Report {
    pub fn new(settings: &str) -> Report {
        Report {
            settings: settings.to_string(),
            sections: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn row(&mut self, section: &str, row: Row) {
        println!(
            "{section} | {} | {} | {} | {}",
            row.name, row.figure, row.ratio, row.latency
        );
        match self.sections.iter_mut().find(|(s, _)| s == section) {
            Some((_, rows)) => rows.push(row),
            None => self.sections.push((section.to_string(), vec![row])),
        }
    }

    pub fn note(&mut self, note: &str) {
        println!("note: {note}");
        self.notes.push(note.to_string());
    }

    pub fn markdown(&self) -> String {
        let mut md = String::from(
            "# Benchmarks\n\nWritten by `make bench` (`scripts/bench.sh`: a release build of \
             `server/benches/fleet/`, PostgreSQL started by `scripts/postgres.sh`). Every load \
             is measured against the server's own `/healthz` in the same run, on loopback, \
             with the load client in the same process: compare ratios, not absolute figures, \
             across runs.\n\n",
        );
        md.push_str(&format!("- Machine: {}\n", machine()));
        md.push_str(&format!("- Settings: {}\n", self.settings));
        md.push_str(&format!("- Measured: {}\n", today()));
        for note in &self.notes {
            md.push_str(&format!("- {note}\n"));
        }
        for (section, rows) in &self.sections {
            md.push_str(&format!(
                "\n## {section}\n\n| what | figure | vs `/healthz` | p50 / p99 |\n|---|---|---|---|\n"
            ));
            for r in rows {
                md.push_str(&format!(
                    "| {} | {} | {} | {} |\n",
                    r.name, r.figure, r.ratio, r.latency
                ));
            }
        }
        md.push_str(TARGETS);
        md
    }

    pub fn write(&self, path: &str) {
        std::fs::write(path, self.markdown())
            .unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
}

const TARGETS: &str = "
## Targets

| what | target |
|---|---|
| GET config 304 at 10,000 nodes, release in flight | >= 0.5x `/healthz` |
| GET config, full body | >= 0.3x `/healthz` |
| POST config with a heartbeat | >= 0.2x `/healthz` |
| `release.canary.create` (10 %) and advance to 50 % at 100,000 nodes | < 1 s each |
| GET config 304 at 100,000 nodes, at 10 % and at 50 % | within 20 % of the 10,000-node figure |
| `pipeline.get` and the pipeline page at 100,000 nodes | < 300 ms and < 1 MB |
| server RSS at 100,000 nodes | < 300 MB |
| one scheduler tick, 1,000 releases due | < 2 s |
| a rollback reaching 1,000 agents polling every 30 s, with push (issue 15) | < 1 s |
";

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / (1024 * 1024));
    format!("{cores} cores ({cpu}), {memory} GiB")
}

fn today() -> String {
    std::process::Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d %H:%M UTC")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
