//! `/metrics` in Prometheus text format.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServedLabels {
    /// canary, previous, withheld, deployed, undeployed, not_selected
    pub served: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
    pub status: u16,
}

/// The server's metrics; cheap to clone (every field is shared).
#[derive(Clone)]
pub struct Metrics {
    pub config_polls: Family<ServedLabels, Counter>,
    pub agent_requests: Family<RouteLabels, Counter>,
    pub agent_latency: Family<RouteLabels, Histogram>,
    registry: std::sync::Arc<Registry>,
}

impl Default for Metrics {
    fn default() -> Self {
        let config_polls = Family::<ServedLabels, Counter>::default();
        let agent_requests = Family::<RouteLabels, Counter>::default();
        let agent_latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5])
        });
        let mut registry = Registry::with_prefix("vectorflow");
        registry.register(
            "config_pipelines_served",
            "Pipelines in config responses to agents, by what the fencing decision served",
            config_polls.clone(),
        );
        registry.register(
            "agent_requests",
            "Agent protocol requests by route and status code",
            agent_requests.clone(),
        );
        registry.register(
            "agent_request_seconds",
            "Agent protocol request latency",
            agent_latency.clone(),
        );
        Self {
            config_polls,
            agent_requests,
            agent_latency,
            registry: std::sync::Arc::new(registry),
        }
    }
}

impl Metrics {
    pub fn served(&self, kind: &str) {
        self.config_polls
            .get_or_create(&ServedLabels {
                served: kind.to_string(),
            })
            .inc();
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
