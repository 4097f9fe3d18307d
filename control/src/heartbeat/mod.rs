//! Heartbeats: per-pipeline status and cumulative counters become NodePipelineStatus rows,
//! per-minute deltas per node and pipeline, and per-minute pipeline aggregates.

use vf_protocol::{AgentHealth, ComponentMetric, Heartbeat, HostMetrics, PipelineReport};

use crate::fleet::{parse_labels, NodeRow, PipelineStatusRow};
use crate::{ControlError, Db, Result};

mod batch;
pub mod values;

use values::Ignored;

use batch::{Checked, Facts};
pub use batch::{HeartbeatQueue, MAX_PENDING};

/// Longest process status kept; longer values are cut, never refused.
const MAX_STATUS_LEN: usize = 64;
const MAX_REPORTS: usize = 500;
/// The most one report may add to a counter: one trillion (about 16 billion events a second
/// over a minute). A larger delta is a broken or hostile agent, not traffic: it is taken as
/// this much, logged and counted (`vectorflow_counter_deltas_clamped_total`), so a single
/// report can neither overflow a sum nor drown every other node's errors in a rate.
pub const MAX_DELTA_PER_REPORT: i64 = 1_000_000_000_000;

/// The counters of one report, checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub events_in: i64,
    pub events_out: i64,
    pub errors: i64,
    pub discarded: i64,
    pub bytes_in: i64,
    pub bytes_out: i64,
}

/// Protocol names of the [`Counters`], in their order.
const COUNTER_NAMES: [&str; 6] = [
    "eventsIn",
    "eventsOut",
    "errorsTotal",
    "eventsDiscarded",
    "bytesIn",
    "bytesOut",
];

impl Counters {
    /// The report's counters, rounded ([`values::counter`]); absent ones are 0. The second
    /// value marks the counters that were sent but could not be used (noted in `ignored`):
    /// those keep the value stored before ([`Counters::keeping`]), so one bad value neither
    /// reads as a restart nor adds a spike to the gates.
    fn from_report(i: usize, r: &PipelineReport, ignored: &mut Ignored) -> (Counters, [bool; 6]) {
        let sent = [
            &r.events_in,
            &r.events_out,
            &r.errors_total,
            &r.events_discarded,
            &r.bytes_in,
            &r.bytes_out,
        ];
        let mut values = [0i64; 6];
        let mut unusable = [false; 6];
        for (k, value) in sent.into_iter().enumerate() {
            let field = || format!("pipelines[{i}].{}", COUNTER_NAMES[k]);
            match ignored.take(field, value.as_ref(), values::counter) {
                Some(v) => values[k] = v,
                None => unusable[k] = value.is_some(),
            }
        }
        (Counters::from_array(values), unusable)
    }

    /// From the values in [`COUNTER_NAMES`] order.
    fn from_array(values: [i64; 6]) -> Counters {
        let [events_in, events_out, errors, discarded, bytes_in, bytes_out] = values;
        Counters {
            events_in,
            events_out,
            errors,
            discarded,
            bytes_in,
            bytes_out,
        }
    }

    /// The values in [`COUNTER_NAMES`] order.
    fn as_array(self) -> [i64; 6] {
        [
            self.events_in,
            self.events_out,
            self.errors,
            self.discarded,
            self.bytes_in,
            self.bytes_out,
        ]
    }

    /// These counters with each `unusable` one taken from `previous` (0 without one).
    pub fn keeping(self, unusable: [bool; 6], previous: Option<Counters>) -> Counters {
        if !unusable.contains(&true) {
            return self;
        }
        let before = previous.unwrap_or_default().as_array();
        let mut now = self.as_array();
        for k in 0..6 {
            if unusable[k] {
                now[k] = before[k];
            }
        }
        Counters::from_array(now)
    }

    fn of_status(s: &PipelineStatusRow) -> Counters {
        Counters {
            events_in: s.events_in,
            events_out: s.events_out,
            errors: s.errors_total,
            discarded: s.events_discarded,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
        }
    }

    /// What happened since `previous`. A counter that went down means the process restarted,
    /// so its new value is the delta.
    pub fn delta_since(self, previous: Option<Counters>) -> Counters {
        let Some(p) = previous else { return self };
        let d = |now: i64, before: i64| if now >= before { now - before } else { now };
        Counters {
            events_in: d(self.events_in, p.events_in),
            events_out: d(self.events_out, p.events_out),
            errors: d(self.errors, p.errors),
            discarded: d(self.discarded, p.discarded),
            bytes_in: d(self.bytes_in, p.bytes_in),
            bytes_out: d(self.bytes_out, p.bytes_out),
        }
    }

    /// Each delta capped at [`MAX_DELTA_PER_REPORT`], and how many counters were capped.
    pub fn clamped(self) -> (Counters, usize) {
        let mut capped = 0;
        let mut cap = |v: i64| {
            if v > MAX_DELTA_PER_REPORT {
                capped += 1;
                MAX_DELTA_PER_REPORT
            } else {
                v
            }
        };
        let c = Counters {
            events_in: cap(self.events_in),
            events_out: cap(self.events_out),
            errors: cap(self.errors),
            discarded: cap(self.discarded),
            bytes_in: cap(self.bytes_in),
            bytes_out: cap(self.bytes_out),
        };
        (c, capped)
    }
}

/// The sum of counter values, saturating at `i64::MAX` instead of overflowing: stored rows
/// may hold anything up to `i64::MAX`, and a database `SUM` over them would fail.
pub fn saturating_total(values: impl IntoIterator<Item = i64>) -> i64 {
    values
        .into_iter()
        .fold(0i64, |total, v| total.saturating_add(v.max(0)))
}

/// The start of the minute `now` falls in.
pub fn minute_of(now: i64) -> i64 {
    now - now.rem_euclid(60_000)
}

/// The `SET` clauses adding a report's deltas to a per-minute row of `table`, saturating at
/// `i64::MAX`: a node reporting absurd counters must neither fail its own polls (PostgreSQL
/// refuses the overflow) nor leave a row SQLite has turned into a float.
fn add_deltas(table: &str) -> String {
    let max = i64::MAX;
    [
        "events_in",
        "events_out",
        "errors",
        "events_discarded",
        "bytes_in",
        "bytes_out",
    ]
    .iter()
    .map(|c| {
        format!(
            "{c} = CASE WHEN {table}.{c} > {max} - excluded.{c} THEN {max} \
             ELSE {table}.{c} + excluded.{c} END"
        )
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// Free text as PostgreSQL can store it: without NUL characters (SQLite would keep them).
/// Longest stored `failedVersion.reason`.
const MAX_REASON_CHARS: usize = 1000;

pub(crate) fn storable(s: &str) -> String {
    s.replace('\0', "")
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub(crate) fn cut_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// How many of a report's `recentLogs` are kept (the last ones).
pub(crate) const RECENT_LOG_LINES: usize = 20;

fn cut_status(s: &str) -> String {
    cut_bytes(storable(s).trim(), MAX_STATUS_LEN).to_string()
}

/// One pipeline report, checked and ready to store.
#[derive(Debug)]
pub(crate) struct Report {
    pub pipeline_id: String,
    pub version: i64,
    pub status: String,
    pub counters: Counters,
    /// Counters sent but unusable: they keep the stored value ([`Counters::keeping`]).
    pub unusable: [bool; 6],
    pub uptime_seconds: Option<i64>,
    pub pid: Option<i64>,
    pub config_checksum: Option<String>,
    /// The last 20 log lines, as a JSON array.
    pub recent_logs: Option<String>,
    /// `failedVersion`: a version the agent reverted from, and why.
    pub failed_version: Option<i64>,
    pub failed_reason: Option<String>,
    /// `componentMetrics` as JSON, when it fits [`MAX_COMPONENT_METRICS`].
    pub component_metrics: Option<String>,
}

/// The most bytes of one report's `componentMetrics` kept; a larger one is not stored (JSON
/// cannot be cut), and the node page says there are none.
pub(crate) const MAX_COMPONENT_METRICS: usize = 16 * 1024;

impl Report {
    /// The version this report says crashed: one the agent went back from, or the version
    /// it reports `CRASHED`.
    pub fn crashed_version(&self) -> Option<i64> {
        self.failed_version
            .or((self.status == "CRASHED").then_some(self.version))
    }
}

impl Report {
    fn check(i: usize, r: PipelineReport, ignored: &mut Ignored) -> Result<Report> {
        let (counters, unusable) = Counters::from_report(i, &r, ignored);
        let field = |name: &'static str| move || format!("pipelines[{i}].{name}");
        let uptime_seconds = ignored.take(
            field("uptimeSeconds"),
            r.uptime_seconds.as_ref(),
            values::whole_seconds,
        );
        // Checked so a broken agent is seen, not stored: nothing reads them yet.
        for (name, value) in [
            ("spansIn", &r.spans_in),
            ("spansOut", &r.spans_out),
            ("tracesIn", &r.traces_in),
            ("utilization", &r.utilization),
        ] {
            ignored.take(field(name), value.as_ref(), values::amount);
        }
        let recent_logs = r
            .recent_logs
            .map(|l| {
                let last: Vec<String> = l
                    .iter()
                    .rev()
                    .take(RECENT_LOG_LINES)
                    .rev()
                    .map(|line| storable(line))
                    .collect();
                serde_json::to_string(&last)
            })
            .transpose()?;
        let component_metrics = r
            .component_metrics
            .map(|m| component_metrics(i, m, ignored).to_string())
            .map(|m| storable(&m))
            .filter(|m| m.len() <= MAX_COMPONENT_METRICS);
        Ok(Report {
            component_metrics,
            status: cut_status(&r.status),
            pipeline_id: r.pipeline_id,
            version: r.version,
            counters,
            unusable,
            uptime_seconds,
            pid: r.pid,
            config_checksum: r.config_checksum.as_deref().map(storable),
            recent_logs,
            failed_version: r.failed_version.as_ref().map(|f| f.version),
            failed_reason: (r.failed_version.as_ref())
                .map(|f| storable(&f.reason).chars().take(MAX_REASON_CHARS).collect()),
        })
    }
}

/// `componentMetrics` as stored: an object by component id, each with its kind and its
/// usable numbers (`{"in": {"componentKind": "source", "receivedEvents": 42}}`).
fn component_metrics(
    i: usize,
    metrics: Vec<ComponentMetric>,
    ignored: &mut Ignored,
) -> serde_json::Value {
    let mut by_id = serde_json::Map::new();
    for (j, m) in metrics.into_iter().enumerate() {
        let mut fields = ignored.amounts(
            &format!("pipelines[{i}].componentMetrics[{j}]."),
            [
                ("receivedEvents", Some(&m.received_events)),
                ("sentEvents", Some(&m.sent_events)),
                ("receivedBytes", m.received_bytes.as_ref()),
                ("sentBytes", m.sent_bytes.as_ref()),
                ("errorsTotal", m.errors_total.as_ref()),
                ("discardedEvents", m.discarded_events.as_ref()),
                ("latencyMeanSeconds", m.latency_mean_seconds.as_ref()),
            ],
        );
        fields.insert("componentKind".into(), m.component_kind.into());
        by_id.insert(m.component_id, fields.into());
    }
    by_id.into()
}

/// `hostMetrics` as stored: its usable fields, or `None` when none is.
fn host_metrics(host: HostMetrics, ignored: &mut Ignored) -> Option<String> {
    let kept = ignored.amounts("hostMetrics.", host.fields());
    (!kept.is_empty()).then(|| serde_json::Value::from(kept).to_string())
}

/// `agentHealth` as stored: its usable numbers, whole ones as integers.
fn agent_health(health: AgentHealth, ignored: &mut Ignored) -> serde_json::Value {
    let mut kept = ignored.amounts(
        "agentHealth.",
        [
            ("pollErrorsTotal", health.poll_errors_total.as_ref()),
            ("pushReconnectsTotal", health.push_reconnects_total.as_ref()),
            (
                "heartbeatErrorsTotal",
                health.heartbeat_errors_total.as_ref(),
            ),
            ("uptimeSeconds", health.uptime_seconds.as_ref()),
        ],
    );
    if let Some(connected) = health.push_connected {
        kept.insert("pushConnected".into(), connected.into());
    }
    if let Some(running) = health.pipelines_running {
        kept.insert("pipelinesRunning".into(), running.into());
    }
    kept.into()
}

/// What an agent says of itself, as stored (JSON), or `None` when the heartbeat says none
/// of it.
fn agent_report(
    health: Option<serde_json::Value>,
    deployment_mode: Option<String>,
    running_as: Option<String>,
    update_error: Option<String>,
) -> Result<Option<String>> {
    let deployment_mode = crate::agent::optional_text("deploymentMode", deployment_mode, 100)?;
    let running_as = crate::agent::optional_text("runningAs", running_as, 100)?;
    let update_error = update_error.map(|e| {
        storable(&e)
            .chars()
            .take(MAX_REASON_CHARS)
            .collect::<String>()
    });
    if health.is_none()
        && deployment_mode.is_none()
        && running_as.is_none()
        && update_error.is_none()
    {
        return Ok(None);
    }
    Ok(Some(
        serde_json::json!({
            "agentHealth": health,
            "deploymentMode": deployment_mode,
            "runningAs": running_as,
            "updateError": update_error,
        })
        .to_string(),
    ))
}

/// Records a heartbeat: node facts, then each report for a pipeline of the node's
/// environment (reports for unknown pipelines are ignored), in one transaction shared with
/// the heartbeats arriving at the same time. Returns once it is checked and queued, or
/// committed when it changed the node's facts ([`HeartbeatQueue`] says what an
/// acknowledgement promises). Counter deltas capped at [`MAX_DELTA_PER_REPORT`] are counted
/// in [`HeartbeatQueue::capped`].
pub async fn record_heartbeat(db: &Db, node: &NodeRow, hb: Heartbeat, now: i64) -> Result<()> {
    if hb.pipelines.len() > MAX_REPORTS {
        return Err(ControlError::invalid(
            "pipelines",
            format!("at most {MAX_REPORTS} reports"),
        ));
    }
    let labels = match hb.labels {
        Some(l) => Some(serde_json::to_string(&parse_labels("labels", l)?)?),
        None => None,
    };
    let agent_version = crate::agent::optional_text("agentVersion", hb.agent_version, 100)?;
    let vector_version = crate::agent::optional_text("vectorVersion", hb.vector_version, 100)?;
    let mut ignored = Ignored::default();
    let reports = hb
        .pipelines
        .into_iter()
        .enumerate()
        .map(|(i, r)| Report::check(i, r, &mut ignored))
        .collect::<Result<Vec<_>>>()?;
    let host_metrics = hb.host_metrics.and_then(|h| host_metrics(h, &mut ignored));
    let health = hb.agent_health.map(|h| agent_health(h, &mut ignored));
    if !ignored.is_empty() {
        tracing::warn!(
            node_id = node.id,
            "heartbeat values that cannot be used were ignored: {}",
            ignored.describe()
        );
        for label in ignored.labels() {
            db.heartbeats.ignored(&label);
        }
    }
    let agent_report = agent_report(health, hb.deployment_mode, hb.running_as, hb.update_error)?;

    // Most heartbeats repeat the node's facts: then only the time changes, and that is
    // kept in memory like a poll's (`LastSeen`) instead of written here.
    let changes = |new: &Option<String>, old: &Option<String>| new.is_some() && new != old;
    let facts_changed = changes(&agent_version, &node.agent_version)
        || changes(&vector_version, &node.vector_version)
        || changes(&labels, &Some(node.reported_labels.clone()))
        || host_metrics.is_some()
        || agent_report.is_some();
    let facts = if facts_changed {
        Some(Facts {
            agent_version,
            vector_version,
            labels,
            host_metrics,
            agent_report,
        })
    } else {
        db.last_seen.record(&node.id, now);
        None
    };
    let checked = Checked {
        node_id: node.id.clone(),
        environment_id: node.environment_id.clone(),
        facts,
        reports,
        now,
    };
    db.heartbeats.write(db, checked).await
}

/// Marks the node as seen (a poll without a heartbeat body): in memory, written by the next
/// flush ([`crate::fleet::LastSeen`]), so a poll is not a database write.
pub fn touch(db: &Db, node: &NodeRow, now: i64) {
    db.last_seen.record(&node.id, now);
}

/// One per-minute aggregate row of a pipeline.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct MinuteRow {
    pub minute: i64,
    pub events_in: i64,
    pub events_out: i64,
    pub errors: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(events_in: i64) -> Counters {
        Counters {
            events_in,
            ..Counters::default()
        }
    }

    #[test]
    fn a_growing_counter_yields_the_difference() {
        assert_eq!(c(150).delta_since(Some(c(100))), c(50));
    }

    #[test]
    fn a_counter_that_went_down_means_a_restart_and_counts_whole() {
        assert_eq!(c(30).delta_since(Some(c(100))), c(30));
    }

    #[test]
    fn the_first_report_counts_whole() {
        assert_eq!(c(42).delta_since(None), c(42));
    }

    #[test]
    fn a_delta_over_a_trillion_is_capped_and_counted() {
        let (c, capped) = Counters {
            events_in: i64::MAX,
            errors: MAX_DELTA_PER_REPORT,
            bytes_out: MAX_DELTA_PER_REPORT + 1,
            ..Counters::default()
        }
        .clamped();
        assert_eq!(c.events_in, MAX_DELTA_PER_REPORT);
        assert_eq!(c.errors, MAX_DELTA_PER_REPORT);
        assert_eq!(c.bytes_out, MAX_DELTA_PER_REPORT);
        assert_eq!(capped, 2);
    }

    #[test]
    fn totals_saturate_instead_of_overflowing() {
        assert_eq!(saturating_total([i64::MAX, i64::MAX, 5]), i64::MAX);
        assert_eq!(saturating_total([2, 3]), 5);
        assert_eq!(saturating_total([]), 0);
    }

    #[test]
    fn minutes_are_floored_to_the_minute() {
        assert_eq!(minute_of(125_000), 120_000);
    }

    #[test]
    fn nul_characters_are_dropped_from_a_status_rather_than_refused() {
        assert_eq!(cut_status("RUN\0NING"), "RUNNING");
    }

    #[test]
    fn an_overlong_status_is_cut_not_refused() {
        let long = "X".repeat(100);
        assert_eq!(cut_status(&long).len(), MAX_STATUS_LEN);
        assert_eq!(cut_status("WARMING_UP"), "WARMING_UP");
    }
}
