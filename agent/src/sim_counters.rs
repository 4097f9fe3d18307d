//! Synthetic cumulative counters for simulated pipelines, so a fleet of fake nodes feeds the
//! server's throughput and error-rate gates with believable numbers.

use vf_protocol::PipelineReport;

use crate::directive;

/// Bytes counted per synthetic event.
pub const BYTES_PER_EVENT: i64 = 256;

/// Fleet-wide simulation settings (`--sim-events-per-poll`, `--sim-error-rate`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimSettings {
    pub events_per_poll: u64,
    /// Default error fraction; a `# vf-simulate: error_rate=...` directive in the config wins.
    pub error_rate: f64,
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            events_per_poll: 100,
            error_rate: 0.0,
        }
    }
}

/// Counters of one simulated pipeline version; a new version starts a new set at zero.
#[derive(Debug, Clone, PartialEq)]
pub struct SimCounters {
    events_per_poll: i64,
    error_rate: f64,
    events: i64,
}

impl SimCounters {
    pub fn new(settings: SimSettings, config_yaml: &str) -> Self {
        SimCounters {
            events_per_poll: i64::try_from(settings.events_per_poll).unwrap_or(i64::MAX),
            error_rate: directive::parse(config_yaml)
                .error_rate
                .unwrap_or(settings.error_rate),
            events: 0,
        }
    }

    /// One poll's worth of traffic.
    pub fn tick(&mut self) {
        self.events = self.events.saturating_add(self.events_per_poll);
    }

    /// Copies the counters into a heartbeat report.
    pub fn fill(&self, report: &mut PipelineReport) {
        let bytes = self.events.saturating_mul(BYTES_PER_EVENT);
        report.events_in = Some(self.events.into());
        report.events_out = Some(self.events.into());
        report.errors_total = Some(self.errors().into());
        report.events_discarded = Some(0.into());
        report.bytes_in = Some(bytes.into());
        report.bytes_out = Some(bytes.into());
    }

    fn errors(&self) -> i64 {
        // Events stay far below 2^53, so the f64 round trip is exact enough.
        (self.events as f64 * self.error_rate).round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(counters: &SimCounters) -> PipelineReport {
        let mut report = PipelineReport::default();
        counters.fill(&mut report);
        report
    }

    #[test]
    fn each_tick_adds_the_configured_events_in_and_out() {
        let mut counters = SimCounters::new(SimSettings::default(), "sources: {}");
        counters.tick();
        counters.tick();
        let report = report(&counters);
        assert_eq!(report.events_in, Some(200.into()));
        assert_eq!(report.events_out, Some(200.into()));
        assert_eq!(report.bytes_in, Some((200 * BYTES_PER_EVENT).into()));
        assert_eq!(report.errors_total, Some(0.into()));
    }

    #[test]
    fn errors_are_the_rounded_fraction_of_events_at_the_default_rate() {
        let settings = SimSettings {
            events_per_poll: 10,
            error_rate: 0.15,
        };
        let mut counters = SimCounters::new(settings, "");
        counters.tick();
        assert_eq!(report(&counters).errors_total, Some(2.into()));
    }

    #[test]
    fn config_directive_overrides_the_default_error_rate() {
        let settings = SimSettings {
            events_per_poll: 100,
            error_rate: 0.01,
        };
        let mut counters = SimCounters::new(settings, "# vf-simulate: error_rate=0.25\n");
        counters.tick();
        assert_eq!(report(&counters).errors_total, Some(25.into()));
    }
}
