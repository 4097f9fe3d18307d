//! Customer-keyed rolling rollouts: Bun-compatible buckets, rollout resolution, and cache
//! staleness. Pure functions over plain data: no I/O, no async, builds for wasm32.
//!
//! - [`bucket`]: `Bun.hash(customerId) % 100`, identical to the TypeScript services.
//! - [`RolloutEntry`], [`Rollout`], [`EdgeConfig`]: the published document and its resolution
//!   (an org override wins over the global entry; an absent rollout is off).
//! - [`change_percent`]: the only way a percent changes.
//! - [`is_snapshot_cache_stale`] (two-field check) and [`FlipLog`] (exact across many changes).

pub mod config;
pub mod entry;
pub mod find;
pub mod flips;
pub mod percent;
pub mod rollout;
pub mod stale;
pub mod wyhash;

pub use config::EdgeConfig;
pub use entry::{change_percent, enabled, percent_includes, RolloutEntry};
pub use find::find_customer_in_bucket_range;
pub use flips::{FlipLog, FlipLogLengthError};
pub use percent::{Percent, PercentError};
pub use rollout::{resolve, Rollout};
pub use stale::{is_snapshot_cache_stale, routing_changed};
pub use wyhash::{bucket, bun_hash, wyhash, BUCKETS};
