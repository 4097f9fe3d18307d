//! Sign-in rate limiting. Every attempt counts against its keys *before* the password is
//! checked (so a burst of parallel guesses cannot all slip in while the first are still
//! hashing); a success takes its attempt back. Past a key's limit within the window,
//! attempts for that key are refused (429) until the window ends, even with the right
//! password. In memory: a restart forgets the counts, which only ever lets an attacker start
//! over once.
//!
//! The keys: the account from one address (strict: 5), the account from anywhere (50: an
//! attacker with many addresses gets no more, and cannot lock the owner out from theirs
//! with 5 wrong guesses), and the address across accounts (20: an office shares one).

use std::collections::HashMap;
use std::sync::Mutex;

/// Attempts allowed for one account from one address in one window.
pub const ACCOUNT_FROM_ADDRESS_LIMIT: u32 = 5;
/// Attempts allowed for one account from all addresses together.
pub const ACCOUNT_LIMIT: u32 = 50;
/// Attempts allowed from one client address across accounts.
pub const IP_LIMIT: u32 = 20;
/// The window, in milliseconds.
pub const WINDOW_MS: i64 = 15 * 60 * 1000;

#[derive(Debug, Clone, Copy)]
struct Window {
    started_at: i64,
    attempts: u32,
}

/// Attempts by key (`account:<email>@<addr>`, `account:<email>`, `ip:<addr>`).
#[derive(Debug, Default)]
pub struct LoginLimiter {
    windows: Mutex<HashMap<String, Window>>,
}

impl LoginLimiter {
    /// Counts an attempt against every key, or refuses it (`Err(seconds to wait)`, nothing
    /// counted) when any key is at its limit at `now`. One lock: parallel attempts see each
    /// other.
    pub fn attempt(&self, keys: &[(String, u32)], now: i64) -> Result<(), u64> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        // Forget finished windows so the map stays as small as the recent attackers.
        windows.retain(|_, w| now < w.started_at + WINDOW_MS);
        let wait_ms = keys
            .iter()
            .filter_map(|(key, limit)| windows.get(key).map(|w| (w, limit)))
            .filter(|(w, limit)| w.attempts >= **limit)
            .map(|(w, _)| w.started_at + WINDOW_MS - now)
            .max();
        if let Some(ms) = wait_ms {
            return Err((ms.max(1) as u64).div_ceil(1000));
        }
        for (key, _) in keys {
            windows
                .entry(key.clone())
                .or_insert(Window {
                    started_at: now,
                    attempts: 0,
                })
                .attempts += 1;
        }
        Ok(())
    }

    /// A successful sign-in takes its attempt back from every key and clears the account's
    /// count from this address.
    pub fn succeeded(&self, keys: &[(String, u32)]) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for (i, (key, _)) in keys.iter().enumerate() {
            if i == 0 {
                windows.remove(key);
            } else if let Some(w) = windows.get_mut(key) {
                w.attempts = w.attempts.saturating_sub(1);
            }
        }
    }
}

/// The keys a sign-in attempt counts against, strictest first.
pub fn keys(email: &str, ip: Option<&str>) -> Vec<(String, u32)> {
    match ip {
        Some(ip) => vec![
            (format!("account:{email}@{ip}"), ACCOUNT_FROM_ADDRESS_LIMIT),
            (format!("account:{email}"), ACCOUNT_LIMIT),
            (format!("ip:{ip}"), IP_LIMIT),
        ],
        None => vec![(format!("account:{email}"), ACCOUNT_FROM_ADDRESS_LIMIT)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail_n(l: &LoginLimiter, k: &[(String, u32)], n: u32, now: i64) {
        for _ in 0..n {
            l.attempt(k, now).unwrap();
        }
    }

    #[test]
    fn an_account_is_locked_from_an_address_after_five_until_the_window_ends() {
        let l = LoginLimiter::default();
        let k = keys("ann@example.com", Some("10.0.0.1"));
        fail_n(&l, &k, ACCOUNT_FROM_ADDRESS_LIMIT, 1_000);
        assert_eq!(l.attempt(&k, 1_000), Err(900));
        assert_eq!(l.attempt(&k, 1_000 + WINDOW_MS - 1), Err(1));
        assert!(l.attempt(&k, 1_000 + WINDOW_MS).is_ok());
    }

    #[test]
    fn the_owner_signs_in_from_their_address_while_an_attacker_is_locked_out_of_theirs() {
        let l = LoginLimiter::default();
        let attacker = keys("ann@example.com", Some("203.0.113.7"));
        fail_n(&l, &attacker, ACCOUNT_FROM_ADDRESS_LIMIT, 0);
        assert!(l.attempt(&attacker, 1).is_err());
        assert!(l
            .attempt(&keys("ann@example.com", Some("10.0.0.1")), 1)
            .is_ok());
    }

    #[test]
    fn many_addresses_together_get_no_more_than_the_account_limit() {
        let l = LoginLimiter::default();
        for i in 0..ACCOUNT_LIMIT {
            l.attempt(&keys("ann@example.com", Some(&format!("10.1.0.{i}"))), 0)
                .unwrap();
        }
        assert!(l
            .attempt(&keys("ann@example.com", Some("10.2.0.1")), 1)
            .is_err());
    }

    #[test]
    fn one_address_failing_on_many_accounts_is_limited_per_address() {
        let l = LoginLimiter::default();
        for i in 0..IP_LIMIT {
            l.attempt(&keys(&format!("user{i}@example.com"), Some("10.0.0.9")), 0)
                .unwrap();
        }
        assert!(l
            .attempt(&keys("new@example.com", Some("10.0.0.9")), 1)
            .is_err());
        assert!(l
            .attempt(&keys("new@example.com", Some("10.0.0.8")), 1)
            .is_ok());
    }

    #[test]
    fn a_burst_of_parallel_attempts_is_cut_at_the_limit_before_any_password_is_checked() {
        let l = std::sync::Arc::new(LoginLimiter::default());
        let k = keys("ann@example.com", Some("10.0.0.1"));
        let admitted: u32 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..64)
                .map(|_| s.spawn(|| u32::from(l.attempt(&k, 0).is_ok())))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        assert_eq!(admitted, ACCOUNT_FROM_ADDRESS_LIMIT);
    }

    #[test]
    fn a_success_takes_its_attempt_back() {
        let l = LoginLimiter::default();
        let k = keys("ann@example.com", Some("10.0.0.1"));
        fail_n(&l, &k, ACCOUNT_FROM_ADDRESS_LIMIT - 1, 0);
        l.attempt(&k, 0).unwrap();
        l.succeeded(&k);
        fail_n(&l, &k, ACCOUNT_FROM_ADDRESS_LIMIT, 1);
        assert!(l.attempt(&k, 2).is_err());
    }
}
