//! The metrics `/metrics` exposes in Prometheus text format. They live here so the service
//! layer counts what it decides (gate results, transitions) where it decides it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateLabels {
    pub gate: String,
    /// pass, fail, skipped
    pub verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// release.advance, release.complete, release.hold, release.rollback, release.refused
    pub action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignInLabels {
    /// ok, failed, locked
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InputLabels {
    /// Which gate input could not be read: error_counts, throughput.
    pub input: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnreadableLabels {
    /// The stored column that did not parse: status, plan, planless, stages, current_stage.
    pub field: String,
    /// Who read it, and so what followed: `fencing` (every node served the previous
    /// version), `scheduler` (not judged), `view` (shown as unreadable), `action` (refused).
    pub reader: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReleaseLabels {
    pub pipeline: String,
    pub status: String,
}

/// The server's metrics; cheap to clone (every field is shared).
#[derive(Clone)]
pub struct Metrics {
    pub config_polls: Family<ServedLabels, Counter>,
    pub agent_requests: Family<RouteLabels, Counter>,
    pub agent_latency: Family<RouteLabels, Histogram>,
    pub gate_results: Family<GateLabels, Counter>,
    /// Checks of signal gates during bakes, by gate and verdict; `error` means the signal
    /// could not be read (Prometheus unreachable, a timeout), never a value over a threshold.
    pub gate_checks: Family<GateLabels, Counter>,
    pub transitions: Family<TransitionLabels, Counter>,
    /// 1 for each pipeline's latest release status; refreshed from the database at scrape.
    pub release_status: Family<ReleaseLabels, Gauge>,
    /// Sign-in attempts by result: a climbing `failed` or any `locked` is worth an alert.
    pub sign_ins: Family<SignInLabels, Counter>,
    /// Counter deltas from agents capped at `heartbeat::MAX_DELTA_PER_REPORT`.
    pub counter_deltas_clamped: Counter,
    /// Gate evaluations that could not read an input: the scheduler held the release, or an
    /// operator's action was refused; never retried silently.
    pub gate_input_errors: Family<InputLabels, Counter>,
    /// Reads of a stored release whose state does not parse (fencing, views, actions).
    pub release_state_unreadable: Family<UnreadableLabels, Counter>,
    /// Agent push streams open on this server; set at each scrape.
    pub push_streams: Gauge,
    registry: std::sync::Arc<Registry>,
}

fn gate_labels(result: &vf_rules::GateResult) -> GateLabels {
    GateLabels {
        gate: result.gate.clone(),
        verdict: result.verdict.as_str().to_string(),
    }
}

impl Metrics {
    /// The metrics, with the counts the heartbeat writer keeps (capped deltas, ignored
    /// values: [`crate::heartbeat::HeartbeatQueue`]) and the push streams' outcomes
    /// ([`crate::push::PushHub`]).
    pub fn new(heartbeats: &crate::heartbeat::HeartbeatQueue, push: &crate::push::PushHub) -> Self {
        let counter_deltas_clamped = heartbeats.capped.clone();
        let push_streams = Gauge::default();
        let config_polls = Family::<ServedLabels, Counter>::default();
        let agent_requests = Family::<RouteLabels, Counter>::default();
        let agent_latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5])
        });
        let gate_results = Family::<GateLabels, Counter>::default();
        let gate_checks = Family::<GateLabels, Counter>::default();
        let transitions = Family::<TransitionLabels, Counter>::default();
        let release_status = Family::<ReleaseLabels, Gauge>::default();
        let sign_ins = Family::<SignInLabels, Counter>::default();
        let gate_input_errors = Family::<InputLabels, Counter>::default();
        let release_state_unreadable = Family::<UnreadableLabels, Counter>::default();
        let mut registry = Registry::with_prefix("vectorflow");
        registry.register(
            "gate_results",
            "Gate verdicts recorded on releases, by gate and verdict",
            gate_results.clone(),
        );
        registry.register(
            "gate_checks",
            "Gate checks during bakes, by gate and verdict (error: the signal could not be read)",
            gate_checks.clone(),
        );
        registry.register(
            "release_transitions",
            "Release transitions applied, by action",
            transitions.clone(),
        );
        registry.register(
            "release_status",
            "1 for the status of each pipeline's latest release",
            release_status.clone(),
        );
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
        registry.register(
            "sign_ins",
            "Operator sign-in attempts by result (ok, failed, locked)",
            sign_ins.clone(),
        );
        registry.register(
            "counter_deltas_clamped",
            "Agent counter deltas over one trillion in one report, taken as one trillion",
            counter_deltas_clamped.clone(),
        );
        registry.register(
            "gate_input_errors",
            "Gate evaluations that could not read an input, by input (the release is held or the action refused)",
            gate_input_errors.clone(),
        );
        registry.register(
            "release_state_unreadable",
            "Reads of a stored release whose state does not parse, by field (fencing then serves the previous version)",
            release_state_unreadable.clone(),
        );
        registry.register(
            "agent_values_ignored",
            "Numbers in agent heartbeats that could not be used (negative counters, counters past 2^63), by field; the rest of each heartbeat was kept",
            heartbeats.ignored.clone(),
        );
        registry.register(
            "push_streams_connected",
            "Agent push streams open on this server",
            push_streams.clone(),
        );
        registry.register(
            "push_connections",
            "Agent push streams by outcome: opened, closed (the agent left), revoked (token no longer valid), shutdown",
            push.outcomes.clone(),
        );
        Self {
            push_streams,
            release_state_unreadable,
            sign_ins,
            counter_deltas_clamped,
            gate_input_errors,
            config_polls,
            agent_requests,
            agent_latency,
            gate_results,
            gate_checks,
            transitions,
            release_status,
            registry: std::sync::Arc::new(registry),
        }
    }
    pub fn served(&self, kind: &str) {
        self.config_polls
            .get_or_create(&ServedLabels {
                served: kind.to_string(),
            })
            .inc();
    }

    pub fn gate_result(&self, result: &vf_rules::GateResult) {
        self.gate_results.get_or_create(&gate_labels(result)).inc();
    }

    pub fn gate_check(&self, result: &vf_rules::GateResult) {
        self.gate_checks.get_or_create(&gate_labels(result)).inc();
    }

    pub fn transition(&self, action: crate::audit::AuditAction) {
        self.transitions
            .get_or_create(&TransitionLabels {
                action: action.as_str().to_string(),
            })
            .inc();
    }

    pub fn gate_input_error(&self, input: &str) {
        self.gate_input_errors
            .get_or_create(&InputLabels {
                input: input.to_string(),
            })
            .inc();
    }

    pub fn release_state_unreadable(&self, field: &str, reader: &str) {
        self.release_state_unreadable
            .get_or_create(&UnreadableLabels {
                field: field.to_string(),
                reader: reader.to_string(),
            })
            .inc();
    }

    pub fn sign_in(&self, result: &str) {
        self.sign_ins
            .get_or_create(&SignInLabels {
                result: result.to_string(),
            })
            .inc();
    }

    /// Replaces the release-status gauges with `(pipeline name, status)` pairs.
    pub fn set_release_statuses(&self, latest: &[(String, String)]) {
        self.release_status.clear();
        for (pipeline, status) in latest {
            self.release_status
                .get_or_create(&ReleaseLabels {
                    pipeline: pipeline.clone(),
                    status: status.clone(),
                })
                .set(1);
        }
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
