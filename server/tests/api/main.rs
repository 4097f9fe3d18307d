//! The server started on port 0 with its own database and a manual clock, driven over HTTP
//! and by the real vf-agent library.

// Test helpers (not only #[test] fns) may panic on setup failure.
#![allow(clippy::unwrap_used)]

mod access;
mod accounts;
mod admission;
mod agent_channel;
mod agent_contract;
mod agent_protocol;
mod agent_requests;
mod bootstrap;
mod config_checks;
mod delivery_consistency;
mod edge;
mod fleet_pages;
mod freeze;
mod fuzz_agent;
mod fuzz_opamp;
mod fuzz_support;
mod headers;
mod health;
mod heartbeats;
mod helpers;
mod hostile_counters;
mod last_seen;
mod opamp;
mod openapi;
mod prometheus;
mod promql;
mod racing_operators;
mod rejections;
mod release_apply;
mod release_checks;
mod release_gates;
mod release_offline;
mod release_operators;
mod release_pause;
mod release_races;
mod release_refusals;
mod release_selection;
mod release_unreadable_inputs;
mod release_unreadable_state;
mod releases;
mod revocation;
mod secrets;
mod webhooks;
