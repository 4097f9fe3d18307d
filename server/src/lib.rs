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
