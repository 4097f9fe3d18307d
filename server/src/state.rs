//! What every handler, extractor and middleware shares. Its own module so that start-up
//! (which builds it and the router) and the routes (which read it) both depend on it and
//! not on each other.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use vf_control::metrics::Metrics;
use vf_control::Control;

use crate::auth::AuthSettings;

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    pub control: Control,
    pub metrics: Metrics,
    pub leptos_options: LeptosOptions,
    pub auth: Arc<AuthSettings>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! An [`AppState`] on a fresh SQLite database, for the extractors' unit tests.

    use std::sync::Arc;

    use leptos::config::LeptosOptions;
    use vf_control::testing::TestDb;
    use vf_control::{Control, ManualClock, Settings};

    use super::AppState;

    /// The state and the database it lives on (dropping the database deletes the file).
    pub async fn state() -> (AppState, TestDb) {
        let db = TestDb::sqlite();
        let control = Control::new(
            db.connect().await,
            Arc::new(ManualClock::new(1_700_000_000_000)),
            Settings::default(),
        );
        let state = AppState {
            metrics: control.metrics.clone(),
            control,
            leptos_options: LeptosOptions::builder().output_name("vf").build(),
            auth: Arc::default(),
        };
        (state, db)
    }
}
