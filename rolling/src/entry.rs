//! One rollout level (global or one org's override): its percent, the percent before the last
//! change, and when that change happened; plus the routing rule and the one way to change it.

use serde::{Deserialize, Deserializer, Serialize};

use crate::Percent;

/// A rollout level as published in the edge config:
/// `{"percent": 50, "previousPercent": 20, "changedAt": 1711929600000}`.
///
/// `previous_percent` and `changed_at` exist so caches can tell whether a customer's routing
/// moved since they cached something; they are only ever set by [`change_percent`]. Percents are
/// 0..=100: deserializing a larger value fails, and the only way to change one takes a
/// [`Percent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutEntry {
    /// Share of buckets routed to the new path now.
    #[serde(deserialize_with = "deserialize_percent")]
    pub percent: u8,
    /// `percent` before the last change.
    #[serde(deserialize_with = "deserialize_percent")]
    pub previous_percent: u8,
    /// When the last change happened, unix milliseconds.
    pub changed_at: i64,
}

fn deserialize_percent<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u8, D::Error> {
    Percent::deserialize(deserializer).map(Percent::get)
}

impl RolloutEntry {
    /// A level that has never been turned on: 0%, never changed. What an absent rollout means.
    pub const OFF: RolloutEntry = RolloutEntry {
        percent: 0,
        previous_percent: 0,
        changed_at: 0,
    };
}

impl Default for RolloutEntry {
    fn default() -> Self {
        RolloutEntry::OFF
    }
}

/// The routing rule, shared by [`enabled`], the staleness checks and the flip log so they can
/// never disagree: a bucket is on the new path iff `percent >= 100 || bucket < percent`.
///
/// For real buckets (0..=99) `percent >= 100` adds nothing to `bucket < percent`; it is spelled
/// out so 100% means "everyone" even for a bucket value that did not come from
/// [`crate::bucket`].
pub fn percent_includes(percent: u8, bucket: u8) -> bool {
    percent >= 100 || bucket < percent
}

/// Whether the customer in `bucket` takes the new path under `entry`.
pub fn enabled(entry: &RolloutEntry, bucket: u8) -> bool {
    percent_includes(entry.percent, bucket)
}

/// The only way a percent changes: the old percent becomes `previous_percent` and `now` becomes
/// `changed_at`.
///
/// Setting the same percent again is still recorded (previous = percent, changed_at = now) so
/// the admin log stays truthful, but it moves nobody: every bucket routes the same before and
/// after, so no cache entry turns stale. Note that it also forgets the earlier previous percent,
/// which is why staleness across several changes needs the [`crate::FlipLog`].
pub fn change_percent(entry: &RolloutEntry, new_percent: Percent, now: i64) -> RolloutEntry {
    RolloutEntry {
        percent: new_percent.get(),
        previous_percent: entry.percent,
        changed_at: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(value: u8) -> Percent {
        Percent::new(value).unwrap()
    }

    fn entry(percent: u8) -> RolloutEntry {
        change_percent(&RolloutEntry::OFF, pct(percent), 1_000)
    }

    #[test]
    fn zero_percent_enables_nobody() {
        assert!((0..100).all(|bucket| !enabled(&entry(0), bucket)));
    }

    #[test]
    fn one_hundred_percent_enables_everybody() {
        assert!((0..100).all(|bucket| enabled(&entry(100), bucket)));
        assert!(percent_includes(100, 250));
    }

    #[test]
    fn fifty_percent_enables_exactly_buckets_below_fifty() {
        let half = entry(50);
        assert!(enabled(&half, 0));
        assert!(enabled(&half, 49));
        assert!(!enabled(&half, 50));
        assert!(!enabled(&half, 99));
        assert_eq!((0..100).filter(|&b| enabled(&half, b)).count(), 50);
    }

    #[test]
    fn changing_a_percent_records_the_old_percent_and_the_time() {
        let before = RolloutEntry {
            percent: 20,
            previous_percent: 0,
            changed_at: 10,
        };
        let after = change_percent(&before, pct(50), 99);
        assert_eq!(
            after,
            RolloutEntry {
                percent: 50,
                previous_percent: 20,
                changed_at: 99,
            }
        );
    }

    #[test]
    fn setting_the_same_percent_is_recorded_but_routes_nobody_differently() {
        let before = RolloutEntry {
            percent: 30,
            previous_percent: 10,
            changed_at: 10,
        };
        let after = change_percent(&before, pct(30), 20);
        assert_eq!(after.previous_percent, 30);
        assert_eq!(after.changed_at, 20);
        assert!((0..100).all(|b| enabled(&before, b) == enabled(&after, b)));
    }

    #[test]
    fn entries_use_camel_case_json() {
        let json = serde_json::to_value(RolloutEntry {
            percent: 50,
            previous_percent: 20,
            changed_at: 1_711_929_600_000,
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"percent": 50, "previousPercent": 20, "changedAt": 1_711_929_600_000i64})
        );
        let back: RolloutEntry = serde_json::from_value(json).unwrap();
        assert_eq!(back.previous_percent, 20);
    }

    #[test]
    fn json_entries_with_a_percent_over_one_hundred_are_rejected() {
        let over = r#"{"percent": 101, "previousPercent": 0, "changedAt": 0}"#;
        let error = serde_json::from_str::<RolloutEntry>(over).unwrap_err();
        assert!(error.to_string().contains("between 0 and 100, got 101"));
        let previous_over = r#"{"percent": 1, "previousPercent": 300, "changedAt": 0}"#;
        assert!(serde_json::from_str::<RolloutEntry>(previous_over).is_err());
    }
}
