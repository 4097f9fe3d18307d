//! The client side of VectorFlow's rolling rollouts (SPEC section 6), for any tokio service.
//!
//! - [`EdgeConfigStore`] polls `GET /api/edge-config` (every 30 s by default, with
//!   `If-None-Match`). Before its first successful load it serves [`EdgeConfig::empty`], so every
//!   rollout is off; afterwards it keeps the last good document through errors and reports
//!   itself unhealthy in [`Health`].
//! - [`RolloutLayer`] is a tower layer that, after the service's own auth, pins one
//!   [`RolloutSnapshot`] per request in the request extensions: the customer's bucket, the org,
//!   and the config every rollout is resolved from. A request never sees a mid-request change.
//! - The rules themselves (buckets, org overrides, staleness) are `vf-rolling`'s; this crate only
//!   fetches the document and pins it.
//!
//! See `docs/edge-client.md` for a complete axum example.

mod customer;
mod error;
mod health;
mod layer;
mod options;
mod poll;
mod snapshot;
mod store;

pub use customer::{Customer, CustomerExtension, CustomerResolver};
pub use error::{PollError, StartError};
pub use health::Health;
pub use layer::{RolloutLayer, RolloutService};
pub use options::{
    EdgeClientOptions, DEFAULT_POLL_INTERVAL, DEFAULT_REQUEST_TIMEOUT, EDGE_CONFIG_PATH,
};
pub use snapshot::RolloutSnapshot;
pub use store::{EdgeConfigStore, Refresh};

/// Re-exported so services need only this crate: the document, its entries, the bucket
/// function, and the test helper that finds customer ids in a bucket range.
pub use vf_rolling::{bucket, find_customer_in_bucket_range, EdgeConfig, Rollout, RolloutEntry};

/// `docs/edge-client.md`, compiled (and its test example run) as doctests so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../docs/edge-client.md")]
pub struct EdgeClientGuide;
