//! The crash rule: when a pipeline version counts as healthy, and what a failed exit of its
//! process leads to (restart it, go back to the last good config, or give up). Pure, the clock
//! passed in, so every rule is a unit test.
//!
//! A version is *healthy* once one of its processes has stayed up for `healthy_after`; it then
//! becomes the pipeline's last good config. A version that is not the last good one and fails
//! `limit` times within `window` is given up on. The last good version itself is always
//! restarted: there is nothing better to go back to.

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

/// Reasons longer than this are cut, so a chatty process cannot bloat a heartbeat.
pub const REASON_MAX_CHARS: usize = 500;

/// How the agent supervises pipeline processes (`--crash-limit`, `--crash-window-secs`,
/// `--healthy-after-secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashPolicy {
    /// Failed exits of a new version, within `window`, after which the agent gives up on it.
    pub limit: u32,
    /// How far back failed exits are counted.
    pub window: Duration,
    /// How long a process must stay up for its version to become the last good config.
    pub healthy_after: Duration,
    /// Pause between a failed exit and the restart, so a crash loop does not spin.
    pub restart_delay: Duration,
}

impl Default for CrashPolicy {
    fn default() -> Self {
        CrashPolicy {
            limit: 3,
            window: Duration::from_secs(60),
            healthy_after: Duration::from_secs(10),
            restart_delay: Duration::from_secs(1),
        }
    }
}

impl CrashPolicy {
    /// Whether a process up for `uptime` proves its version.
    pub fn is_healthy(&self, uptime: Duration) -> bool {
        uptime >= self.healthy_after
    }
}

/// Where the failing version stands against the pipeline's last good config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastGood {
    /// The failing version is the last good config: restarting it is all there is.
    ThisVersion,
    /// Another version ran healthily: the agent can go back to it.
    Another,
    /// Nothing ran healthily yet (a first deploy).
    Nothing,
}

/// One failed exit of a pipeline process.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    /// When the agent saw the process end.
    pub at: Instant,
    /// `code 1`, `signal 9`, or why the process could not start.
    pub exit: &'a str,
    /// The last line the process printed, if any.
    pub last_line: Option<&'a str>,
}

/// What to do after a failed exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Start the same version again at `at`.
    Restart { at: Instant },
    /// Run the last good config instead and report this version as failed with `reason`.
    Revert { reason: String },
    /// No good config to go back to: leave the pipeline stopped and report it CRASHED.
    GiveUp { reason: String },
}

/// Failed exits of the version a pipeline runs now; start a new count for each new version.
#[derive(Debug, Clone, Default)]
pub struct Crashes {
    exits: VecDeque<Instant>,
}

impl Crashes {
    /// Counts `failure` and decides what happens next.
    pub fn record(
        &mut self,
        policy: &CrashPolicy,
        failure: Failure<'_>,
        last_good: LastGood,
    ) -> Verdict {
        let limit = usize::try_from(policy.limit.max(1)).unwrap_or(usize::MAX);
        self.exits
            .retain(|exit| failure.at.saturating_duration_since(*exit) < policy.window);
        self.exits.push_back(failure.at);
        while self.exits.len() > limit {
            self.exits.pop_front();
        }
        if last_good == LastGood::ThisVersion || self.exits.len() < limit {
            return Verdict::Restart {
                at: failure.at + policy.restart_delay,
            };
        }
        let reason = reason(self.exits.len(), policy.window, failure);
        if last_good == LastGood::Another {
            Verdict::Revert { reason }
        } else {
            Verdict::GiveUp { reason }
        }
    }
}

/// E.g. `exited 3 times within 60 s; last exit: code 1; last log line: bad sink`.
fn reason(count: usize, window: Duration, failure: Failure<'_>) -> String {
    let window = if window.subsec_nanos() == 0 {
        window.as_secs().to_string()
    } else {
        format!("{:.1}", window.as_secs_f64())
    };
    let mut reason = format!(
        "exited {count} times within {window} s; last exit: {}",
        failure.exit
    );
    if let Some(line) = failure.last_line.map(str::trim).filter(|l| !l.is_empty()) {
        reason.push_str("; last log line: ");
        reason.push_str(line);
    }
    cut(reason, REASON_MAX_CHARS)
}

fn cut(text: String, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars.saturating_sub(1)) {
        Some((end, _)) if text.chars().count() > max_chars => format!("{}…", &text[..end]),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> CrashPolicy {
        CrashPolicy::default()
    }

    fn failure(at: Instant) -> Failure<'static> {
        Failure {
            at,
            exit: "code 1",
            last_line: Some("error: sink `out` is unreachable"),
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn first_failures_of_a_new_version_restart_it_after_the_delay() {
        let t0 = Instant::now();
        let mut crashes = Crashes::default();
        let verdict = crashes.record(&policy(), failure(t0), LastGood::Another);
        assert_eq!(verdict, Verdict::Restart { at: t0 + secs(1) });
        let verdict = crashes.record(&policy(), failure(t0 + secs(2)), LastGood::Another);
        assert_eq!(verdict, Verdict::Restart { at: t0 + secs(3) });
    }

    #[test]
    fn third_failure_within_the_window_reverts_to_the_last_good_config() {
        let t0 = Instant::now();
        let mut crashes = Crashes::default();
        crashes.record(&policy(), failure(t0), LastGood::Another);
        crashes.record(&policy(), failure(t0 + secs(20)), LastGood::Another);
        let verdict = crashes.record(&policy(), failure(t0 + secs(59)), LastGood::Another);
        let Verdict::Revert { reason } = verdict else {
            panic!("expected a revert, got {verdict:?}");
        };
        assert_eq!(
            reason,
            "exited 3 times within 60 s; last exit: code 1; \
             last log line: error: sink `out` is unreachable"
        );
    }

    #[test]
    fn failures_spread_wider_than_the_window_keep_restarting() {
        let t0 = Instant::now();
        let mut crashes = Crashes::default();
        for minute in 0..10 {
            let verdict = crashes.record(
                &policy(),
                failure(t0 + secs(minute * 31)),
                LastGood::Another,
            );
            assert!(
                matches!(verdict, Verdict::Restart { .. }),
                "{minute}: {verdict:?}"
            );
        }
    }

    #[test]
    fn failing_first_deploy_is_given_up_on() {
        let t0 = Instant::now();
        let mut crashes = Crashes::default();
        crashes.record(&policy(), failure(t0), LastGood::Nothing);
        crashes.record(&policy(), failure(t0 + secs(1)), LastGood::Nothing);
        let verdict = crashes.record(&policy(), failure(t0 + secs(2)), LastGood::Nothing);
        assert!(
            matches!(verdict, Verdict::GiveUp { ref reason } if reason.starts_with("exited 3 times"))
        );
    }

    #[test]
    fn last_good_version_is_restarted_however_often_it_fails() {
        let t0 = Instant::now();
        let mut crashes = Crashes::default();
        for n in 0..20 {
            let verdict = crashes.record(&policy(), failure(t0 + secs(n)), LastGood::ThisVersion);
            assert_eq!(
                verdict,
                Verdict::Restart {
                    at: t0 + secs(n + 1)
                }
            );
        }
    }

    #[test]
    fn limit_comes_from_the_policy() {
        let t0 = Instant::now();
        let one = CrashPolicy {
            limit: 1,
            ..policy()
        };
        let verdict = Crashes::default().record(&one, failure(t0), LastGood::Another);
        assert!(
            matches!(verdict, Verdict::Revert { ref reason } if reason.starts_with("exited 1 times"))
        );
    }

    #[test]
    fn reason_without_output_names_the_exit_only_and_long_output_is_cut() {
        let t0 = Instant::now();
        let one = CrashPolicy {
            limit: 1,
            ..policy()
        };
        let silent = Failure {
            at: t0,
            exit: "signal 9",
            last_line: None,
        };
        let verdict = Crashes::default().record(&one, silent, LastGood::Nothing);
        let expected = "exited 1 times within 60 s; last exit: signal 9".to_string();
        assert_eq!(verdict, Verdict::GiveUp { reason: expected });

        let line = "é".repeat(2_000);
        let chatty = Failure {
            last_line: Some(&line),
            ..silent
        };
        let Verdict::GiveUp { reason } = Crashes::default().record(&one, chatty, LastGood::Nothing)
        else {
            panic!("expected to give up");
        };
        assert_eq!(reason.chars().count(), REASON_MAX_CHARS);
        assert!(reason.ends_with('…'));
    }

    #[test]
    fn a_process_is_healthy_once_up_for_the_configured_time() {
        assert!(!policy().is_healthy(Duration::from_millis(9_999)));
        assert!(policy().is_healthy(secs(10)));
    }
}
