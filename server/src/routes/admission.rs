//! Admission of agent requests: at most `limit` in flight, the rest answered 503 with
//! `Retry-After` at once (a queue would only make every agent late), and fair: an agent
//! refused once is let in on its retry even at the limit, from a reserve of a quarter of the
//! limit again, so under overload the refusals rotate through the fleet instead of landing
//! on the same unlucky agents until they starve.
//!
//! Agents are told apart by their `Authorization` header (a hash of it, never the token);
//! enrollment, which has none, shares one key. The set of refused agents is bounded.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The most refused agents remembered; past it a refusal is not remembered (the agent is
/// then refused or admitted like anyone on its retry).
const MAX_OWED: usize = 200_000;

/// The admission state of one group of routes.
#[derive(Debug)]
pub struct Admission {
    limit: usize,
    /// Extra room for agents refused before: a quarter of the limit, at least one.
    reserve: usize,
    retry_after: &'static str,
    in_flight: AtomicUsize,
    /// Agents refused since their last admission.
    owed: Mutex<HashSet<u64>>,
    hasher: RandomState,
}

/// Why a request was let in or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Admitted,
    AdmittedFromReserve,
    Refused,
}

impl Admission {
    pub fn new(limit: usize, retry_after: &'static str) -> Arc<Admission> {
        Arc::new(Admission {
            limit: limit.max(1),
            reserve: (limit / 4).max(1),
            retry_after,
            in_flight: AtomicUsize::new(0),
            owed: Mutex::new(HashSet::new()),
            hasher: RandomState::new(),
        })
    }

    /// Takes a place for the request of agent `key`, or refuses it. An admitted request
    /// holds its place until [`Admission::leave`].
    fn enter(&self, key: u64) -> Verdict {
        let mut owed = self.owed.lock().unwrap_or_else(|e| e.into_inner());
        let was_refused = owed.contains(&key);
        let cap = if was_refused {
            self.limit + self.reserve
        } else {
            self.limit
        };
        let before = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            });
        match before {
            Ok(n) => {
                if was_refused {
                    owed.remove(&key);
                }
                if n < self.limit {
                    Verdict::Admitted
                } else {
                    Verdict::AdmittedFromReserve
                }
            }
            Err(_) => {
                if owed.len() < MAX_OWED {
                    owed.insert(key);
                }
                Verdict::Refused
            }
        }
    }

    fn leave(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    fn key(&self, req: &Request) -> u64 {
        let auth = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        self.hasher.hash_one(auth)
    }
}

/// Releases the place when the response is ready, or when the request is dropped.
struct Place<'a>(&'a Admission);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// The middleware: `middleware::from_fn_with_state(admission, admit)`.
pub async fn admit(State(admission): State<Arc<Admission>>, req: Request, next: Next) -> Response {
    let key = admission.key(&req);
    if admission.enter(key) == Verdict::Refused {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                header::RETRY_AFTER,
                HeaderValue::from_static(admission.retry_after),
            )],
            "server busy, retry later",
        )
            .into_response();
    }
    let _place = Place(&admission);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_the_limit_requests_are_refused() {
        let a = Admission::new(2, "5");
        assert_eq!(a.enter(1), Verdict::Admitted);
        assert_eq!(a.enter(2), Verdict::Admitted);
        assert_eq!(a.enter(3), Verdict::Refused);
        a.leave();
        assert_eq!(a.enter(3), Verdict::Admitted);
    }

    #[test]
    fn an_agent_refused_once_is_let_in_on_its_retry_while_others_still_wait() {
        let a = Admission::new(4, "5");
        for key in 0..4 {
            assert_eq!(a.enter(key), Verdict::Admitted);
        }
        assert_eq!(a.enter(10), Verdict::Refused);
        assert_eq!(a.enter(10), Verdict::AdmittedFromReserve);
        // Its debt is paid: refused again like anyone, and a newcomer is refused too.
        assert_eq!(a.enter(11), Verdict::Refused);
        assert_eq!(a.enter(10), Verdict::Refused);
    }

    #[test]
    fn the_reserve_is_bounded_too() {
        let a = Admission::new(4, "5");
        for key in 0..4 {
            a.enter(key);
        }
        // A reserve of one: the first refused agent gets it, the second waits.
        assert_eq!(a.enter(10), Verdict::Refused);
        assert_eq!(a.enter(11), Verdict::Refused);
        assert_eq!(a.enter(10), Verdict::AdmittedFromReserve);
        assert_eq!(a.enter(11), Verdict::Refused);
        a.leave();
        assert_eq!(a.enter(11), Verdict::AdmittedFromReserve);
    }
}
