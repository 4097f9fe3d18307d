//! A node's derived status, from when it last spoke and what its pipelines report. The
//! browser gets it typed (a serde enum), so pages compare variants, never strings.

use serde::{Deserialize, Serialize};

/// SPEC section 1: HEALTHY, DEGRADED, UNREACHABLE (no contact for 3 poll intervals), UNKNOWN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NodeStatus {
    Healthy,
    Degraded,
    Unreachable,
    Unknown,
}

impl NodeStatus {
    /// Every status, in the order views count and offer them.
    pub const ALL: [NodeStatus; 4] = [
        NodeStatus::Healthy,
        NodeStatus::Degraded,
        NodeStatus::Unreachable,
        NodeStatus::Unknown,
    ];

    /// How many of `statuses` are each status, every status listed in [`NodeStatus::ALL`]
    /// order (with 0 for those absent): the counts views show beside a list of nodes.
    pub fn tally(statuses: impl IntoIterator<Item = NodeStatus>) -> Vec<(NodeStatus, usize)> {
        let mut counts = NodeStatus::ALL.map(|s| (s, 0));
        for s in statuses {
            if let Some((_, n)) = counts.iter_mut().find(|(each, _)| *each == s) {
                *n += 1;
            }
        }
        counts.to_vec()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Healthy => "HEALTHY",
            NodeStatus::Degraded => "DEGRADED",
            NodeStatus::Unreachable => "UNREACHABLE",
            NodeStatus::Unknown => "UNKNOWN",
        }
    }
}

/// Never seen: UNKNOWN. Disconnected, or silent for more than three poll intervals:
/// UNREACHABLE. Any pipeline crashed or stopped: DEGRADED. Otherwise HEALTHY.
pub fn derive_status(
    now: i64,
    last_seen_at: Option<i64>,
    disconnected: bool,
    poll_interval_ms: i64,
    pipeline_statuses: &[&str],
) -> NodeStatus {
    let Some(last_seen) = last_seen_at else {
        return NodeStatus::Unknown;
    };
    if disconnected || now - last_seen > 3 * poll_interval_ms.max(1) {
        return NodeStatus::Unreachable;
    }
    if pipeline_statuses
        .iter()
        .any(|s| matches!(*s, "CRASHED" | "STOPPED"))
    {
        return NodeStatus::Degraded;
    }
    NodeStatus::Healthy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_never_seen_is_unknown() {
        assert_eq!(
            derive_status(10_000, None, false, 5_000, &[]),
            NodeStatus::Unknown
        );
    }

    #[test]
    fn a_node_silent_for_more_than_three_poll_intervals_is_unreachable() {
        assert_eq!(
            derive_status(15_000, Some(0), false, 5_000, &[]),
            NodeStatus::Healthy
        );
        assert_eq!(
            derive_status(15_001, Some(0), false, 5_000, &[]),
            NodeStatus::Unreachable
        );
    }

    #[test]
    fn a_disconnected_node_is_unreachable_at_once() {
        assert_eq!(
            derive_status(1, Some(0), true, 5_000, &[]),
            NodeStatus::Unreachable
        );
    }

    #[test]
    fn a_crashed_pipeline_degrades_the_node_but_unknown_statuses_do_not() {
        assert_eq!(
            derive_status(1, Some(0), false, 5_000, &["RUNNING", "CRASHED"]),
            NodeStatus::Degraded
        );
        assert_eq!(
            derive_status(1, Some(0), false, 5_000, &["RUNNING", "WARMING_UP"]),
            NodeStatus::Healthy
        );
    }

    #[test]
    fn a_tally_lists_every_status_in_order_with_its_count() {
        use NodeStatus::*;
        assert_eq!(
            NodeStatus::tally([Unknown, Healthy, Unknown]),
            vec![(Healthy, 1), (Degraded, 0), (Unreachable, 0), (Unknown, 2)]
        );
    }
}
