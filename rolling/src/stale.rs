//! The two-field cache staleness check from the original design: did this customer's routing
//! move in the entry's last change, and was the cached value written before that change?

use crate::{percent_includes, RolloutEntry};

/// Whether the last change of `entry` moved the customer in `bucket` from one path to the
/// other: `(bucket < previousPercent) != (bucket < percent)`.
///
/// Both sides go through [`percent_includes`], the same rule as [`crate::enabled`], so 100%
/// counts as "everyone" here exactly as it does for routing. For real buckets (0..=99) this is
/// identical to the plain comparison above.
pub fn routing_changed(entry: &RolloutEntry, bucket: u8) -> bool {
    percent_includes(entry.previous_percent, bucket) != percent_includes(entry.percent, bucket)
}

/// Whether a value cached for this customer at `cached_at` (unix ms) must be evicted.
///
/// Stale iff the last change moved this bucket ([`routing_changed`]) and the value was cached
/// before the change (`cached_at < changed_at`). A value cached in the same millisecond as the
/// change counts as cached after it (fresh): the change is published before anyone can read it,
/// so a value written at `changed_at` was written under the new routing. Legacy values without a
/// `cachedAt` are treated as stale whenever the routing changed.
///
/// This only sees the entry's last change. After several changes (50 -> 20 -> 50 -> 60) a value
/// cached while the bucket was on the other path can look fresh; use
/// [`crate::Rollout::is_cache_stale`], which also consults the [`crate::FlipLog`].
pub fn is_snapshot_cache_stale(entry: &RolloutEntry, bucket: u8, cached_at: Option<i64>) -> bool {
    routing_changed(entry, bucket) && cached_at.is_none_or(|cached| cached < entry.changed_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{change_percent, enabled, find_customer_in_bucket_range, Percent};

    const BEFORE: i64 = 1_000;
    const CHANGED: i64 = 2_000;
    const AFTER: i64 = 3_000;

    fn moved(from: u8, to: u8) -> RolloutEntry {
        RolloutEntry {
            percent: to,
            previous_percent: from,
            changed_at: CHANGED,
        }
    }

    fn stale_buckets(entry: &RolloutEntry, cached_at: Option<i64>) -> Vec<u8> {
        (0..100)
            .filter(|&b| is_snapshot_cache_stale(entry, b, cached_at))
            .collect()
    }

    #[test]
    fn forward_migration_makes_newly_enabled_buckets_stale_only_if_cached_before() {
        let entry = moved(0, 50);
        assert!(is_snapshot_cache_stale(&entry, 10, Some(BEFORE)));
        assert!(!is_snapshot_cache_stale(&entry, 10, Some(AFTER)));
        assert!(!is_snapshot_cache_stale(&entry, 70, Some(BEFORE)));
        assert_eq!(
            stale_buckets(&entry, Some(BEFORE)),
            (0..50).collect::<Vec<_>>()
        );
    }

    #[test]
    fn rollback_makes_only_the_buckets_that_lost_the_new_path_stale() {
        let entry = moved(50, 20);
        assert!(!is_snapshot_cache_stale(&entry, 15, Some(BEFORE)));
        assert!(is_snapshot_cache_stale(&entry, 35, Some(BEFORE)));
        assert!(!is_snapshot_cache_stale(&entry, 70, Some(BEFORE)));
        assert_eq!(
            stale_buckets(&entry, Some(BEFORE)),
            (20..50).collect::<Vec<_>>()
        );
        assert!(stale_buckets(&entry, Some(AFTER)).is_empty());
    }

    #[test]
    fn bumping_forward_makes_only_buckets_twenty_to_forty_nine_stale() {
        let entry = moved(20, 50);
        assert_eq!(
            stale_buckets(&entry, Some(BEFORE)),
            (20..50).collect::<Vec<_>>()
        );
    }

    #[test]
    fn full_migration_makes_every_bucket_stale() {
        let entry = moved(0, 100);
        assert_eq!(
            stale_buckets(&entry, Some(BEFORE)),
            (0..100).collect::<Vec<_>>()
        );
        assert!(stale_buckets(&entry, Some(AFTER)).is_empty());
    }

    #[test]
    fn full_rollback_makes_every_bucket_stale() {
        let entry = moved(100, 0);
        assert_eq!(
            stale_buckets(&entry, Some(BEFORE)),
            (0..100).collect::<Vec<_>>()
        );
    }

    #[test]
    fn setting_the_same_percent_again_makes_nothing_stale() {
        let entry = change_percent(&moved(20, 40), Percent::new(40).unwrap(), CHANGED);
        assert!(stale_buckets(&entry, Some(BEFORE)).is_empty());
        assert!(stale_buckets(&entry, None).is_empty());
    }

    #[test]
    fn legacy_values_without_cached_at_are_stale_exactly_where_routing_changed() {
        let entry = moved(20, 50);
        assert_eq!(stale_buckets(&entry, None), (20..50).collect::<Vec<_>>());
        assert!(!is_snapshot_cache_stale(&entry, 5, None));
        assert!(!is_snapshot_cache_stale(&entry, 80, None));
    }

    #[test]
    fn a_value_cached_in_the_same_millisecond_as_the_change_is_fresh() {
        let entry = moved(0, 50);
        assert!(!is_snapshot_cache_stale(&entry, 10, Some(CHANGED)));
        assert!(is_snapshot_cache_stale(&entry, 10, Some(CHANGED - 1)));
    }

    #[test]
    fn staleness_and_routing_agree_that_one_hundred_percent_means_everyone() {
        for bucket in 0..100 {
            let full = moved(99, 100);
            assert_eq!(routing_changed(&full, bucket), bucket == 99);
            assert!(enabled(&full, bucket));
        }
    }

    #[test]
    fn real_customers_found_by_bucket_follow_the_scenarios() {
        let bumped = moved(20, 50);
        let low = find_customer_in_bucket_range(0, 19).unwrap();
        let crossing = find_customer_in_bucket_range(20, 49).unwrap();
        let high = find_customer_in_bucket_range(50, 99).unwrap();
        let stale = |id: &str| is_snapshot_cache_stale(&bumped, crate::bucket(id), Some(BEFORE));
        assert!(!stale(&low));
        assert!(stale(&crossing));
        assert!(!stale(&high));
    }

    /// 50 -> 20 -> 50 -> 60: bucket 30 was on, went off at t1, came back on at t2. A value
    /// cached between t1 and t2 was cached on the old path, but the entry now only remembers
    /// 50 -> 60, which does not move bucket 30, so the two-field check calls it fresh. The flip
    /// log records bucket 30's last flip at t2 and gets it right.
    #[test]
    fn two_field_check_misses_a_bucket_that_flipped_in_an_earlier_change() {
        let pct = |v| Percent::new(v).unwrap();
        let (t1, t2, t3) = (100, 200, 300);
        let mut rollout = crate::Rollout::new("v2-cache");
        rollout.set_global(pct(50), 50);
        rollout.set_global(pct(20), t1);
        let cached_between = 150;
        let routing_when_cached = enabled(&rollout.global, 30);
        rollout.set_global(pct(50), t2);
        rollout.set_global(pct(60), t3);
        let routing_now = enabled(&rollout.global, 30);

        assert_ne!(routing_when_cached, routing_now);
        assert!(!is_snapshot_cache_stale(
            &rollout.global,
            30,
            Some(cached_between)
        ));
        assert!(rollout.is_cache_stale(None, 30, Some(cached_between)));
        // A value cached after bucket 30 came back is fresh under both checks.
        assert!(!rollout.is_cache_stale(None, 30, Some(t2)));
    }
}
