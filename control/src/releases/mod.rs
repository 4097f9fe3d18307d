//! Releases: one attempt to ship a pipeline version, possibly in stages. The rules (what a
//! plan may say, who is targeted, what a gate concludes, which transition follows) are in
//! `vf-rules`; this module reads their inputs and persists their decisions.

mod actions;
mod create;
mod inputs;
pub mod scheduler;
mod series;
mod state;
mod targets;
mod transition;

pub use actions::{act, act_with_reason, operator_reason};
pub use create::{baseline_eps, create_canary, CanaryRequest, BASELINE_WINDOW_MS};
pub use inputs::{
    error_counts, events_in_minute, events_in_minutes, gate_inputs, throughput_eps, GateInput,
    InputError,
};
pub use scheduler::{check_soon, tick, TickOutcome, Ticked};
pub use series::{stage_series, SeriesPoint};
pub use state::{
    get_release, in_flight_row, latest_release, latest_statuses, list_releases, load_release,
    read_release, release_creator, ReadBy, Release, ReleaseRow, StoredRelease, Unreadable,
    RELEASE_COLUMNS,
};
pub use targets::FleetSnapshot;

/// Applies a step decided outside this module (the environment's line pausing or resuming
/// a release) at the clock's now.
pub(crate) async fn apply_step(
    ctl: &crate::Control,
    release: &Release,
    step: vf_rules::Step,
    actor: &crate::Actor,
) -> crate::Result<Release> {
    transition::apply(ctl, release, step, None, actor, ctl.now()).await
}
