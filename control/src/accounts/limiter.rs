//! Sign-in rate limiting: failed attempts are counted per account and per client IP in a
//! fixed window; past the limit, sign-ins for that key are refused (429) until the window
//! ends, even with the right password. A success clears the account's count. In memory: a
//! restart forgets the counts, which only ever lets an attacker start over once.

use std::collections::HashMap;
use std::sync::Mutex;

/// Failed sign-ins allowed per account in one window.
pub const ACCOUNT_LIMIT: u32 = 5;
/// Failed sign-ins allowed per client IP in one window (an office shares one address).
pub const IP_LIMIT: u32 = 20;
/// The window, in milliseconds.
pub const WINDOW_MS: i64 = 15 * 60 * 1000;

#[derive(Debug, Clone, Copy)]
struct Window {
    started_at: i64,
    failures: u32,
}

/// Counts of failed sign-ins by key (`account:<email>`, `ip:<addr>`).
#[derive(Debug, Default)]
pub struct LoginLimiter {
    windows: Mutex<HashMap<String, Window>>,
}

impl LoginLimiter {
    /// `Err(seconds to wait)` when any of `keys` is over its limit at `now`.
    pub fn check(&self, keys: &[(String, u32)], now: i64) -> Result<(), u64> {
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let mut wait_ms = 0i64;
        for (key, limit) in keys {
            if let Some(w) = windows.get(key) {
                let ends = w.started_at + WINDOW_MS;
                if now < ends && w.failures >= *limit {
                    wait_ms = wait_ms.max(ends - now);
                }
            }
        }
        if wait_ms > 0 {
            Err((wait_ms as u64).div_ceil(1000))
        } else {
            Ok(())
        }
    }

    /// Counts one failure against every key.
    pub fn record_failure(&self, keys: &[(String, u32)], now: i64) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        // Forget finished windows so the map stays as small as the recent attackers.
        windows.retain(|_, w| now < w.started_at + WINDOW_MS);
        for (key, _) in keys {
            let w = windows.entry(key.clone()).or_insert(Window {
                started_at: now,
                failures: 0,
            });
            w.failures += 1;
        }
    }

    /// Clears a key's count (a successful sign-in clears its account's).
    pub fn clear(&self, key: &str) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        windows.remove(key);
    }
}

/// The keys a sign-in attempt counts against.
pub fn keys(email: &str, ip: Option<&str>) -> Vec<(String, u32)> {
    let mut keys = vec![(format!("account:{email}"), ACCOUNT_LIMIT)];
    if let Some(ip) = ip {
        keys.push((format!("ip:{ip}"), IP_LIMIT));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_locked_after_its_limit_until_the_window_ends() {
        let l = LoginLimiter::default();
        let k = keys("ann@example.com", Some("10.0.0.1"));
        for i in 0..ACCOUNT_LIMIT {
            assert!(l.check(&k, 1_000 + i as i64).is_ok());
            l.record_failure(&k, 1_000 + i as i64);
        }
        assert_eq!(l.check(&k, 1_000), Err(900));
        assert_eq!(l.check(&k, 1_000 + WINDOW_MS - 1), Err(1));
        assert!(l.check(&k, 1_000 + WINDOW_MS).is_ok());
    }

    #[test]
    fn one_ip_failing_on_many_accounts_is_limited_per_ip() {
        let l = LoginLimiter::default();
        for i in 0..IP_LIMIT {
            l.record_failure(&keys(&format!("user{i}@example.com"), Some("10.0.0.9")), 0);
        }
        assert!(l
            .check(&keys("new@example.com", Some("10.0.0.9")), 1)
            .is_err());
        assert!(l
            .check(&keys("new@example.com", Some("10.0.0.8")), 1)
            .is_ok());
    }

    #[test]
    fn a_cleared_account_starts_over() {
        let l = LoginLimiter::default();
        let k = keys("ann@example.com", None);
        for _ in 0..ACCOUNT_LIMIT {
            l.record_failure(&k, 0);
        }
        l.clear("account:ann@example.com");
        assert!(l.check(&k, 1).is_ok());
    }
}
