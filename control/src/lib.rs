//! The service layer of VectorFlow: everything the HTTP routes and the server functions of
//! the web app do, minus parsing and rendering. Rules (what is allowed, who is served what)
//! come from `vf-rules`; this crate reads and writes the database around them.

pub mod access;
pub mod accounts;
pub mod agent;
pub mod audit;
pub mod channel;
pub mod clock;
pub mod config_check;
pub mod db;
pub mod delivery;
pub mod error;
pub mod fleet;
pub mod freeze;
pub mod generation;
pub mod handle;
pub mod heartbeat;
pub mod ids;
pub mod metrics;
pub mod opamp;
pub mod pipelines;
pub mod promql;
pub mod push;
pub mod releases;
pub mod requests;
mod revoke;
pub mod rolling;
#[doc(hidden)]
pub mod testing;
pub mod webhooks;

pub use audit::Actor;
pub use clock::{Clock, ManualClock, SystemClock};
pub use db::Db;
pub use error::{ControlError, Doing, Result};
pub use handle::{Control, Settings};
