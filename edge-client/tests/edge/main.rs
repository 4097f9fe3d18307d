//! The real VectorFlow server (port 0, temporary SQLite, manual clock) and the edge client
//! together: admin changes over HTTP, polls, outages, tokens, in-flight requests.

// Test helpers (not only #[test] fns) may panic on setup failure.
#![allow(clippy::unwrap_used)]

mod failures;
mod helpers;
mod in_flight;
mod outage;
mod polling;
mod scripted;
mod token;
