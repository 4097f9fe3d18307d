//! `--wait`: what a release's state means for the waiting command (its exit code), and how
//! its progress reads: on a terminal, a bar per stage with the bake countdown and the latest
//! gate values, redrawn in place; elsewhere (CI logs), one plain line whenever something
//! other than the countdown changed. Pure functions of the release as `release.canary.get`
//! returns it.

use serde_json::Value;
use vf_rules::ReleaseStatus;

/// Exit codes of a waiting command (and of every command: 0 success, 3 error).
pub const EXIT_COMPLETE: i32 = 0;
pub const EXIT_ROLLED_BACK: i32 = 1;
pub const EXIT_WAITING_FOR_OPERATOR: i32 = 2;
pub const EXIT_ERROR: i32 = 3;

/// Where a release stands for someone waiting on it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A stage is baking: keep waiting.
    InFlight,
    /// Every node converges on the canary.
    Complete,
    /// Rolled back, and why.
    RolledBack(String),
    /// Held or paused: an operator must act. Why.
    Waiting(String),
    /// The stored state cannot be read: why.
    Unreadable(String),
}

impl Outcome {
    /// The exit code it ends a wait with; `None` while in flight.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Outcome::InFlight => None,
            Outcome::Complete => Some(EXIT_COMPLETE),
            Outcome::RolledBack(_) => Some(EXIT_ROLLED_BACK),
            Outcome::Waiting(_) => Some(EXIT_WAITING_FOR_OPERATOR),
            Outcome::Unreadable(_) => Some(EXIT_ERROR),
        }
    }
}

fn text(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.is_empty())
}

pub fn outcome(release: &Value) -> Outcome {
    if let Some(why) = text(&release["unreadable"]) {
        return Outcome::Unreadable(why.to_owned());
    }
    let status = release["status"].as_str().and_then(ReleaseStatus::parse);
    let paused = &release["paused"];
    match status {
        Some(ReleaseStatus::Broadened) => Outcome::Complete,
        Some(ReleaseStatus::RolledBack) => Outcome::RolledBack(
            text(&release["failure_reason"])
                .unwrap_or("rolled back")
                .to_owned(),
        ),
        Some(_) if paused.is_object() => {
            let by = text(&paused["by"]).unwrap_or("an operator");
            Outcome::Waiting(match text(&paused["reason"]) {
                Some(reason) => format!("paused by {by}: {reason}"),
                None => format!("paused by {by}"),
            })
        }
        Some(ReleaseStatus::HealthCheck) => Outcome::Waiting(
            text(&release["hold_reason"])
                .unwrap_or("held for an operator")
                .to_owned(),
        ),
        Some(ReleaseStatus::CanaryDeployed) => Outcome::InFlight,
        None => Outcome::Unreadable(format!("unknown status {}", release["status"])),
    }
}

/// `m:ss` of a duration in milliseconds (never negative).
fn clock(ms: i64) -> String {
    let secs = (ms.max(0) + 999) / 1000;
    format!("{}:{:02}", secs / 60, secs % 60)
}

/// The latest value of each gate checked in `stage`: `errorRate 0.8 (limit 5) PASS`.
fn gate_values(stage: &Value) -> Vec<String> {
    stage["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let last = &c["last"];
            let gate = last["gate"].as_str().unwrap_or("gate");
            let verdict = last["verdict"].as_str().unwrap_or("?");
            let number = |v: &Value| {
                v.as_f64()
                    .map(|x| format!("{}", (x * 100.0).round() / 100.0))
            };
            match (number(&last["observed"]), number(&last["threshold"])) {
                (Some(o), Some(t)) => format!("{gate} {o} (limit {t}) {verdict}"),
                (Some(o), None) => format!("{gate} {o} {verdict}"),
                _ => format!("{gate} {verdict}"),
            }
        })
        .collect()
}

/// One line per stage, each with a bar of its bake: done, baking (with the time left and the
/// gates' latest values), held, or not opened.
pub fn stage_lines(release: &Value, width: usize) -> Vec<String> {
    let count = release["stage_count"].as_i64().unwrap_or(0);
    let current = release["current_stage"].as_i64().unwrap_or(0);
    let now = release["now"].as_i64().unwrap_or(0);
    let status = release["status"].as_str().and_then(ReleaseStatus::parse);
    let stages = release["stages"].as_array().cloned().unwrap_or_default();
    (0..count)
        .map(|i| {
            let stage = stages.get(i as usize).cloned().unwrap_or(Value::Null);
            let started = stage["started_at"].as_i64();
            let deadline = stage["bake_deadline"].as_i64();
            let (fraction, state) = match (started, deadline, &stage["outcome"]) {
                (None, _, _) | (_, None, _) => (0.0, "not opened".to_owned()),
                (Some(_), Some(_), Value::String(o)) => (1.0, o.to_lowercase()),
                (Some(s), Some(d), _)
                    if i == current && status == Some(ReleaseStatus::CanaryDeployed) =>
                {
                    let total = (d - s).max(1) as f64;
                    let done = ((now - s) as f64 / total).clamp(0.0, 1.0);
                    let left = if release["paused"].is_object() {
                        "paused".to_owned()
                    } else {
                        format!("{} left", clock(d - now))
                    };
                    (done, format!("baking, {left}"))
                }
                (Some(_), Some(_), _) => (1.0, "bake over".to_owned()),
            };
            let filled = (fraction * width as f64).round() as usize;
            let bar = format!(
                "{}{}",
                "#".repeat(filled),
                "-".repeat(width - filled.min(width))
            );
            let gates = gate_values(&stage);
            let gates = if gates.is_empty() {
                String::new()
            } else {
                format!(" - {}", gates.join(", "))
            };
            format!("stage {}/{count} [{bar}] {state}{gates}", i + 1)
        })
        .collect()
}

/// The plain line for logs: status, stage and gates, without the countdown (so it changes
/// only when something happens).
pub fn summary_line(release: &Value) -> String {
    let status = release["status"].as_str().unwrap_or("?");
    let count = release["stage_count"].as_i64().unwrap_or(0);
    let current = release["current_stage"].as_i64().unwrap_or(0);
    let stage = release["stages"]
        .get(current as usize)
        .cloned()
        .unwrap_or(Value::Null);
    let gates = gate_values(&stage);
    let mut line = format!("{status}: stage {}/{count}", current + 1);
    if release["paused"].is_object() {
        line.push_str(", paused");
    }
    if let Some(hold) = text(&release["hold_reason"]) {
        line.push_str(&format!(", held: {hold}"));
    }
    if !gates.is_empty() {
        line.push_str(&format!(" - {}", gates.join(", ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn release(status: &str) -> Value {
        json!({
            "status": status, "stage_count": 2, "current_stage": 0, "now": 20_000,
            "stages": [{
                "started_at": 0, "bake_deadline": 60_000, "outcome": null,
                "checks": [{"last": {"gate": "errorRate", "verdict": "PASS", "observed": 0.123, "threshold": 5.0}}],
            }],
        })
    }

    #[test]
    fn a_wait_ends_complete_rolled_back_or_waiting_for_an_operator() {
        assert_eq!(outcome(&release("CANARY_DEPLOYED")), Outcome::InFlight);
        assert_eq!(outcome(&release("BROADENED")).exit_code(), Some(0));
        let mut rolled = release("ROLLED_BACK");
        rolled["failure_reason"] = json!("stage 1 failed: errorRate");
        assert_eq!(
            outcome(&rolled),
            Outcome::RolledBack("stage 1 failed: errorRate".into())
        );
        assert_eq!(outcome(&rolled).exit_code(), Some(1));
        let mut held = release("HEALTH_CHECK");
        held["hold_reason"] = json!("stage 1 passed; waiting for an operator");
        assert_eq!(outcome(&held).exit_code(), Some(2));
        let mut paused = release("CANARY_DEPLOYED");
        paused["paused"] = json!({"by": "ana@example.com", "reason": "db maintenance"});
        assert_eq!(
            outcome(&paused),
            Outcome::Waiting("paused by ana@example.com: db maintenance".into())
        );
        let mut broken = release("CANARY_DEPLOYED");
        broken["unreadable"] = json!("releases.state: not JSON");
        assert_eq!(outcome(&broken).exit_code(), Some(3));
    }

    #[test]
    fn each_stage_has_a_bar_with_its_countdown_and_gate_values() {
        assert_eq!(
            stage_lines(&release("CANARY_DEPLOYED"), 12),
            [
                "stage 1/2 [####--------] baking, 0:40 left - errorRate 0.12 (limit 5) PASS",
                "stage 2/2 [------------] not opened",
            ]
        );
        let mut done = release("HEALTH_CHECK");
        done["stages"][0]["outcome"] = json!("PASSED");
        assert!(stage_lines(&done, 4)[0].starts_with("stage 1/2 [####] passed"));
    }

    #[test]
    fn the_plain_line_leaves_the_countdown_out() {
        let mut r = release("CANARY_DEPLOYED");
        let before = summary_line(&r);
        r["now"] = json!(50_000);
        assert_eq!(summary_line(&r), before, "only time passed");
        assert_eq!(
            before,
            "CANARY_DEPLOYED: stage 1/2 - errorRate 0.12 (limit 5) PASS"
        );
    }
}
