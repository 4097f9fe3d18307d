//! What every handler, extractor and middleware shares. Its own module so that start-up
//! (which builds it and the router) and the routes (which read it) both depend on it and
//! not on each other.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use vf_control::metrics::Metrics;
use vf_control::Control;

use crate::auth::AuthSettings;

/// Shared state of every handler: one `Arc`, so the clone every extractor and middleware
/// takes per request is one counter increment, not a copy of each handle inside.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// What [`AppState`] shares; its fields read through the state (`state.control`).
pub struct Shared {
    pub control: Control,
    pub metrics: Metrics,
    pub leptos_options: LeptosOptions,
    pub auth: Arc<AuthSettings>,
}

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
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

    use super::{AppState, Shared};

    /// The same state with other auth settings.
    pub fn with_auth(state: &AppState, auth: crate::auth::AuthSettings) -> AppState {
        AppState::new(Shared {
            control: state.control.clone(),
            metrics: state.metrics.clone(),
            leptos_options: state.leptos_options.clone(),
            auth: Arc::new(auth),
        })
    }

    /// The state and the database it lives on (dropping the database deletes the file).
    pub async fn state() -> (AppState, TestDb) {
        let db = TestDb::sqlite();
        let control = Control::new(
            db.connect().await,
            Arc::new(ManualClock::new(1_700_000_000_000)),
            Settings::default(),
        );
        let state = AppState::new(Shared {
            metrics: control.metrics.clone(),
            control,
            leptos_options: LeptosOptions::builder().output_name("vf").build(),
            auth: Arc::default(),
        });
        (state, db)
    }
}
