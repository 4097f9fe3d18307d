//! `Health`: whether the store's last poll worked and which document it serves.

use std::time::SystemTime;

/// What a service exposes on its own health or metrics endpoint about its rollout config.
///
/// `healthy` is false before the first successful load (the store serves the empty config,
/// every rollout off) and after any failed poll (the store keeps the last good config). It
/// turns true again with the next successful poll, a `304 Not Modified` included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The last poll succeeded (or the store is static).
    pub healthy: bool,
    /// When a poll last succeeded (wall clock); `None` if none ever has.
    pub last_success: Option<SystemTime>,
    /// Why the last poll failed; cleared by the next success.
    pub last_error: Option<String>,
    /// Failed polls since the last success.
    pub consecutive_failures: u32,
    /// Version of the document being served; 0 for the empty config.
    pub version: i64,
}

impl Health {
    /// A polling store that has not loaded anything yet.
    pub(crate) fn not_loaded() -> Health {
        Health {
            healthy: false,
            last_success: None,
            last_error: None,
            consecutive_failures: 0,
            version: 0,
        }
    }

    /// A poll succeeded at `now` and the store serves `version`.
    pub(crate) fn record_success(&mut self, now: SystemTime, version: i64) {
        self.healthy = true;
        self.last_success = Some(now);
        self.last_error = None;
        self.consecutive_failures = 0;
        self.version = version;
    }

    /// A poll failed; the served document (and so `version`) stays as it was.
    pub(crate) fn record_failure(&mut self, error: String) {
        self.healthy = false;
        self.last_error = Some(error);
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_the_version_and_a_success_clears_the_error() {
        let mut health = Health::not_loaded();
        health.record_success(SystemTime::UNIX_EPOCH, 4);
        health.record_failure("down".to_owned());
        health.record_failure("still down".to_owned());
        assert!(!health.healthy);
        assert_eq!(health.version, 4);
        assert_eq!(health.consecutive_failures, 2);
        assert_eq!(health.last_error.as_deref(), Some("still down"));
        assert_eq!(health.last_success, Some(SystemTime::UNIX_EPOCH));
        health.record_success(SystemTime::UNIX_EPOCH, 5);
        assert!(health.healthy);
        assert_eq!(health.last_error, None);
        assert_eq!(health.consecutive_failures, 0);
    }
}
