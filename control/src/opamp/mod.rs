//! The OpAMP path (SPEC section 4): OpenTelemetry Collectors poll `POST /v1/opamp` with
//! protobuf `AgentToServer` messages and are served, as OpAMP remote config, exactly what
//! [`crate::delivery::served_pipelines`] fences for them, like vf-agents.
//!
//! Pure rules live in [`identity`] (instance uids, agent descriptions), [`config`] (the
//! config map, its hash and the resend rule), [`status`] (remote-config status and health
//! as pipeline process status) and [`transport`] (media type, gzip, size limit); [`store`]
//! is the data access and [`exchange`] one round trip.

pub mod config;
pub mod exchange;
pub mod identity;
pub mod proto;
pub mod status;
pub mod store;
pub mod transport;

/// The protobuf runtime the messages are built with, for callers that encode or decode
/// them (the HTTP route, tests) without depending on it themselves.
pub use prost;

pub use exchange::{
    authenticate, bad_request, exchange, Exchange, POLL_INTERVAL_MS, SERVER_CAPABILITIES,
};
pub use store::KIND_OTEL_COLLECTOR;
