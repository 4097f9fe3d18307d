//! How long to wait after a failed poll. Pure functions of the failure count and a jitter
//! sample in `[0, 1)`, so the bounds are testable without a clock.

use std::time::Duration;

use crate::error::AgentError;

/// First retry delay ceiling.
pub const BASE_DELAY: Duration = Duration::from_secs(1);
/// No retry waits longer than this (unless the server's `Retry-After` says so).
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// Exponential backoff with "equal jitter": for the `attempt`-th consecutive failure (0-based)
/// the ceiling is `min(BASE_DELAY * 2^attempt, MAX_DELAY)` and the delay lies in
/// `[ceiling / 2, ceiling]`, so a fleet that failed together does not retry in lockstep.
pub fn backoff_delay(attempt: u32, jitter: f64) -> Duration {
    let ceiling = BASE_DELAY
        .checked_mul(2u32.saturating_pow(attempt))
        .map_or(MAX_DELAY, |d| d.min(MAX_DELAY));
    let half = ceiling / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

/// The delay after `error`: the server's `Retry-After` when it sent one, the slowest backoff
/// step for a revoked token (an operator must act; hammering the server will not help), and
/// exponential backoff otherwise.
pub fn retry_delay(error: &AgentError, attempt: u32, jitter: f64) -> Duration {
    match error {
        AgentError::Overloaded {
            retry_after: Some(delay),
            ..
        } => *delay,
        AgentError::Unauthorized | AgentError::EnrollmentRejected => {
            backoff_delay(u32::MAX, jitter)
        }
        _ => backoff_delay(attempt, jitter),
    }
}

/// Counts consecutive failures for the poll loop.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// The delay after one more failure.
    pub fn next_delay(&mut self, error: &AgentError) -> Duration {
        let delay = retry_delay(error, self.failures, rand::random::<f64>());
        self.failures = self.failures.saturating_add(1);
        delay
    }

    /// Called after a success.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error() -> AgentError {
        AgentError::Status {
            status: 500,
            body: String::new(),
        }
    }

    #[test]
    fn first_retry_waits_between_half_a_second_and_a_second() {
        assert_eq!(backoff_delay(0, 0.0), Duration::from_millis(500));
        assert_eq!(backoff_delay(0, 1.0), Duration::from_secs(1));
    }

    #[test]
    fn delay_doubles_with_each_consecutive_failure() {
        assert_eq!(backoff_delay(3, 1.0), Duration::from_secs(8));
        assert_eq!(backoff_delay(4, 1.0), Duration::from_secs(16));
    }

    #[test]
    fn delay_never_exceeds_sixty_seconds_however_many_failures() {
        for attempt in [6, 7, 20, 31, 32, 1000, u32::MAX] {
            for jitter in [0.0, 0.5, 0.999, 1.0, 7.0] {
                let delay = backoff_delay(attempt, jitter);
                assert!(delay <= MAX_DELAY, "{attempt} {jitter}: {delay:?}");
                assert!(delay >= MAX_DELAY / 2, "{attempt} {jitter}: {delay:?}");
            }
        }
    }

    #[test]
    fn jitter_spreads_delays_within_the_bounds() {
        let low = backoff_delay(2, 0.0);
        let high = backoff_delay(2, 0.99);
        assert!(low < high);
        assert!(low >= Duration::from_secs(2) && high <= Duration::from_secs(4));
    }

    #[test]
    fn retry_after_from_the_server_is_honoured_exactly() {
        let error = AgentError::Overloaded {
            status: 503,
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(retry_delay(&error, 0, 0.3), Duration::from_secs(7));
    }

    #[test]
    fn overload_without_retry_after_falls_back_to_backoff() {
        let error = AgentError::Overloaded {
            status: 429,
            retry_after: None,
        };
        assert_eq!(retry_delay(&error, 0, 1.0), Duration::from_secs(1));
    }

    #[test]
    fn revoked_token_retries_slowly_even_on_the_first_failure() {
        let delay = retry_delay(&AgentError::Unauthorized, 0, 0.0);
        assert!(delay >= Duration::from_secs(30), "{delay:?}");
    }

    #[test]
    fn backoff_grows_and_resets_after_a_success() {
        let mut backoff = Backoff::default();
        for _ in 0..10 {
            backoff.next_delay(&server_error());
        }
        assert!(backoff.next_delay(&server_error()) >= MAX_DELAY / 2);
        backoff.reset();
        assert!(backoff.next_delay(&server_error()) <= BASE_DELAY);
    }
}
