//! VectorFlow's server: the web app, the agent protocol and (later) the scheduler, as a
//! library so tests start it on port 0 with their own database.

pub mod auth;
pub mod config;
pub mod error;
pub mod extract;
pub mod routes;
pub mod scheduler;
pub mod server_fns;
pub mod startup;
pub mod state;
pub mod telemetry;

pub use config::Config;
pub use startup::{build, build_with_clock, Application};
pub use state::AppState;

/// jemalloc instead of glibc's malloc, for every binary built on this library (the server,
/// the bench, the tests): whole-fleet reads allocate and free hundreds of megabytes across
/// threads, and glibc kept most of it resident in per-thread arenas. Bench process RSS at
/// 100,000 nodes right after the pipeline page: glibc 415 MB, jemalloc 194 MB (71 MB once
/// idle; it returns freed memory within a second, `.cargo/config.toml`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
