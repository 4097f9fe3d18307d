//! The rollout engine's rules, as plain functions over plain data.
//!
//! Everything that decides *what* happens to a release lives here so that the server, the
//! scheduler, both agent config paths and the browser editor (this crate compiles to
//! `wasm32-unknown-unknown`) agree by construction. Nothing here reads a clock, a database or
//! the network: time arrives as `i64` unix milliseconds and fetched data arrives as arguments.
//!
//! One rule per file, tests at the bottom of each:
//! - [`percent`]: the exact hundredths type behind percentage selectors.
//! - [`plan`]: parsing a rollout plan (and a plan-less canary) from its wire JSON.
//! - [`select`]: which nodes a stage targets.
//! - [`fencing`]: which version a node is served while a release is in flight.
//! - [`gates`]: gate verdicts from already-fetched inputs, and the no-data policy.
//! - [`checks`]: checks of the signal gates during a bake, and failure limits.
//! - [`config`]: what a pipeline config must be before a version of it exists.
//! - [`freeze`]: what an environment allows now: a stopped line, freeze windows.
//! - [`node`]: a node's status (HEALTHY, DEGRADED, UNREACHABLE, UNKNOWN) from its last contact.
//! - [`promql`]: reading a Prometheus answer down to the one number a gate compares.
//! - [`release`]: release statuses, operator actions and what happens when a bake ends;
//!   `release/state.rs` holds the stored release state and the one pure transition.

pub mod access;
pub mod checks;
pub mod config;
pub mod events;
pub mod fencing;
pub mod freeze;
pub mod gates;
pub mod node;
pub mod offline;
pub mod percent;
pub mod plan;
pub mod promql;
pub mod release;
pub mod select;

pub use checks::{Check, GateChecks};
pub use config::{check_config_yaml, ConfigProblem};
pub use fencing::{served, InFlight, Served, ServedKind};
pub use gates::{
    all_passed, applied, crashed, custom_promql, error_rate, evaluate, preflight, promql_queries,
    settle, stage_results, stage_results_of, throughput_drop, CanaryNodes, ErrorCounts, GateInputs,
    GateResult, NodeCrash, NodeErrors, PromQlOutcome, Verdict,
};
pub use node::{derive_status, NodeStatus};
pub use offline::{NodeContact, OfflineDecision, OfflinePolicy, OfflineRule, OfflineSettings};
pub use percent::Percent;
pub use plan::{
    parse_canary_selector, BakeSeconds, CanarySelector, Comparator, Gate, OnNoData, PlanError,
    RolloutPlan, Scope, Selector, Stage, Unparsed, Watch,
};
pub use promql::{parse_promql_response, PromQlError};
pub use release::{
    allowed_actions, check_action, on_bake_expired, on_check_failed, on_manual, open_stage, Action,
    Decision, DecisionKind, Deploy, GateEvaluation, Note, OpenedStage, Pause, Refusal,
    RefusedAttempt, ReleaseState, ReleaseStatus, StageOutcome, StageState, Step, Transition,
    TransitionError, Trigger, MAX_REASON_CHARS,
};
pub use select::{
    cumulative_targets, fleet_admitted, labels_match, percentage_count, percentage_targets,
    rank_key, selector_targets, stage_additions, NodeRef, SelectError,
};
