//! The real built server binary run as child processes: killed with SIGKILL mid-bake and
//! restarted, two replicas racing on one PostgreSQL database (deciding, and serving nodes
//! that poll both), and a SIGTERM arriving while a request is in flight. Each test bounds
//! every wait and kills its children when it fails.

// Test helpers (not only #[test] fns) may panic on setup failure.
#![allow(clippy::unwrap_used)]

mod cli;
mod delivery;
mod fixture;
mod push;
mod replicas;
mod restart;
mod server;
mod shutdown;
