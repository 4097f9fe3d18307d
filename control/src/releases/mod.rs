//! Releases: one attempt to ship a pipeline version, possibly in stages.

mod state;

pub use state::{in_flight_release, ReleaseRow, StageState, RELEASE_COLUMNS};
