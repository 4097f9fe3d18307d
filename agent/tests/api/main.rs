//! Real agents against an in-test fake control plane.

// Test helpers (not only #[test] fns) may panic on setup failure.
#![allow(clippy::unwrap_used)]

mod crash_revert;
mod enrollment;
mod fake_server;
mod pipelines;
mod polling;
mod processes;
mod self_update;
mod simulation;
