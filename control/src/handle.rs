//! [`Control`]: the one handle the HTTP routes, the server functions and the scheduler share.

use std::sync::Arc;

use crate::promql::PromSettings;
use crate::{Clock, Db};

/// Settings the service layer needs at run time (validated at start-up by the server).
#[derive(Debug, Clone)]
pub struct Settings {
    /// How often agents are told to poll, in milliseconds.
    pub poll_interval_ms: i64,
    /// Set when `VF_PROMETHEUS_URL` is: customPromQL gates are available.
    pub prometheus: Option<PromSettings>,
    /// How long a sign-in lasts, in milliseconds.
    pub session_ttl_ms: i64,
    /// `VF_CONFIG_VALIDATE_COMMAND`: checks every config before a version of it exists.
    pub config_validator: Option<crate::config_check::ConfigValidator>,
    /// `VF_OFFLINE_NODES_DEFAULT`: what an offline targeted node does to a stage whose plan
    /// does not say (`offlineNodes`).
    pub offline_nodes_default: vf_rules::OfflinePolicy,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            poll_interval_ms: 5_000,
            prometheus: None,
            session_ttl_ms: 12 * 60 * 60 * 1000,
            config_validator: None,
            offline_nodes_default: vf_rules::OfflinePolicy::default(),
        }
    }
}

/// Database, clock and settings. Cheap to clone.
#[derive(Clone)]
pub struct Control {
    pub db: Db,
    pub clock: Arc<dyn Clock>,
    pub settings: Arc<Settings>,
    /// Outgoing HTTP (PromQL queries).
    pub http: reqwest::Client,
    pub metrics: crate::metrics::Metrics,
    /// Failed sign-ins per account and IP.
    pub login_limiter: Arc<crate::accounts::limiter::LoginLimiter>,
    /// Targeted sets by release row version, and version bodies, for the config paths.
    pub delivery: Arc<crate::delivery::DeliveryCache>,
    /// The agents holding a push stream open on this server.
    pub push: Arc<crate::push::PushHub>,
}

impl Control {
    pub fn new(db: Db, clock: Arc<dyn Clock>, settings: Settings) -> Self {
        let push = Arc::<crate::push::PushHub>::default();
        Self {
            metrics: crate::metrics::Metrics::new(&db.heartbeats, &push),
            db,
            clock,
            settings: Arc::new(settings),
            http: reqwest::Client::new(),
            login_limiter: Arc::default(),
            delivery: Arc::default(),
            push,
        }
    }

    /// Now, in unix milliseconds, from the injected clock.
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("dialect", &self.db.dialect)
            .field("settings", &self.settings)
            .finish()
    }
}
