//! `FlipLog`: for each bucket, the last time its routing flipped, so staleness stays exact
//! across any number of changes, override removals and rollout deletions.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::percent_includes;

/// Buckets as an index range; matches [`crate::BUCKETS`].
const BUCKET_COUNT: usize = crate::BUCKETS as usize;

/// Per bucket, when its routing last flipped (unix ms), or `None` if it never did since the log
/// started. Serialized as a JSON list of 100 nullable numbers.
///
/// The two-field check only remembers the last change, so a bucket that flipped off and back on
/// in earlier changes can look fresh. The log keeps the latest flip of every bucket instead:
/// whatever happened in between, if a bucket's routing now differs from when a value was cached,
/// some flip happened after the cache time and the latest flip is at least that late.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Option<i64>>", into = "Vec<Option<i64>>")]
pub struct FlipLog {
    /// Index = bucket (0..=99).
    pub flipped_at: [Option<i64>; BUCKET_COUNT],
}

impl Default for FlipLog {
    fn default() -> Self {
        FlipLog {
            flipped_at: [None; BUCKET_COUNT],
        }
    }
}

impl FlipLog {
    /// A log in which no bucket has flipped yet.
    pub fn new() -> FlipLog {
        FlipLog::default()
    }

    /// A percent went from `old_percent` to `new_percent` at `at`: every bucket whose routing
    /// differs between the two is marked as flipped at `at`.
    ///
    /// A mark never moves backwards: if `at` is earlier than a bucket's recorded flip (a clock
    /// that stepped back), the later time is kept, which can only evict more, never less.
    pub fn record_change(&mut self, old_percent: u8, new_percent: u8, at: i64) {
        for (bucket, slot) in (0u8..).zip(self.flipped_at.iter_mut()) {
            if percent_includes(old_percent, bucket) != percent_includes(new_percent, bucket) {
                *slot = Some(slot.map_or(at, |earlier| earlier.max(at)));
            }
        }
    }

    /// An org override was removed at `at`: that org's customers move from the override's
    /// percent to the global (fallback) percent.
    pub fn record_removal(&mut self, override_percent: u8, fallback_percent: u8, at: i64) {
        self.record_change(override_percent, fallback_percent, at);
    }

    /// A rollout (or one level of it) was deleted at `at`: everybody goes to the old path, so
    /// every bucket that `percent` had on the new path flips.
    pub fn record_deletion(&mut self, percent: u8, at: i64) {
        self.record_change(percent, 0, at);
    }

    /// The latest flip of any bucket.
    pub fn last_flip(&self) -> Option<i64> {
        self.flipped_at.iter().flatten().copied().max()
    }

    /// Whether a value cached for `bucket` at `cached_at` must be evicted: the bucket flipped
    /// after it was cached (`cached_at < flipped_at`; the same millisecond counts as after the
    /// flip, as in [`crate::is_snapshot_cache_stale`]). Values without a `cachedAt` are stale if
    /// the bucket ever flipped.
    ///
    /// A bucket outside 0..=99 cannot come from [`crate::bucket`]; it is judged against the
    /// latest flip of any bucket, which errs towards evicting.
    pub fn is_stale_exact(&self, bucket: u8, cached_at: Option<i64>) -> bool {
        let flipped = match self.flipped_at.get(usize::from(bucket)) {
            Some(slot) => *slot,
            None => self.last_flip(),
        };
        match (flipped, cached_at) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(flipped), Some(cached)) => cached < flipped,
        }
    }
}

impl From<FlipLog> for Vec<Option<i64>> {
    fn from(log: FlipLog) -> Self {
        log.flipped_at.to_vec()
    }
}

impl TryFrom<Vec<Option<i64>>> for FlipLog {
    type Error = FlipLogLengthError;

    fn try_from(list: Vec<Option<i64>>) -> Result<Self, Self::Error> {
        let length = list.len();
        list.try_into()
            .map(|flipped_at| FlipLog { flipped_at })
            .map_err(|_| FlipLogLengthError(length))
    }
}

/// A serialized flip log must have exactly one slot per bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlipLogLengthError(pub usize);

impl fmt::Display for FlipLogLengthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "flip log must list exactly {BUCKET_COUNT} buckets, got {}",
            self.0
        )
    }
}

impl std::error::Error for FlipLogLengthError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{is_snapshot_cache_stale, RolloutEntry};
    use proptest::prelude::*;

    fn flipped(log: &FlipLog) -> Vec<u8> {
        (0u8..)
            .zip(log.flipped_at.iter())
            .filter(|(_, slot)| slot.is_some())
            .map(|(bucket, _)| bucket)
            .collect()
    }

    #[test]
    fn a_new_log_calls_nothing_stale() {
        let log = FlipLog::new();
        assert!((0..100).all(|b| !log.is_stale_exact(b, None)));
        assert_eq!(log.last_flip(), None);
    }

    #[test]
    fn a_change_marks_only_the_buckets_that_crossed() {
        let mut log = FlipLog::new();
        log.record_change(20, 50, 7);
        assert_eq!(flipped(&log), (20..50).collect::<Vec<_>>());
        assert_eq!(log.flipped_at[20], Some(7));
    }

    #[test]
    fn removing_an_override_marks_buckets_between_override_and_global() {
        let mut log = FlipLog::new();
        log.record_removal(100, 30, 7);
        assert_eq!(flipped(&log), (30..100).collect::<Vec<_>>());
    }

    #[test]
    fn deleting_a_rollout_marks_every_bucket_that_was_on() {
        let mut log = FlipLog::new();
        log.record_deletion(40, 7);
        assert_eq!(flipped(&log), (0..40).collect::<Vec<_>>());
        let mut full = FlipLog::new();
        full.record_deletion(100, 7);
        assert_eq!(flipped(&full).len(), 100);
    }

    #[test]
    fn an_earlier_timestamp_never_moves_a_flip_back() {
        let mut log = FlipLog::new();
        log.record_change(0, 50, 500);
        log.record_change(50, 0, 400);
        assert_eq!(log.flipped_at[10], Some(500));
    }

    #[test]
    fn a_value_cached_in_the_same_millisecond_as_the_flip_is_fresh() {
        let mut log = FlipLog::new();
        log.record_change(0, 50, 500);
        assert!(!log.is_stale_exact(10, Some(500)));
        assert!(log.is_stale_exact(10, Some(499)));
        assert!(log.is_stale_exact(10, None));
        assert!(!log.is_stale_exact(60, None));
    }

    #[test]
    fn an_out_of_range_bucket_is_judged_against_the_latest_flip() {
        let mut log = FlipLog::new();
        log.record_change(0, 10, 500);
        assert!(log.is_stale_exact(200, Some(499)));
        assert!(!log.is_stale_exact(200, Some(500)));
    }

    #[test]
    fn the_log_serializes_as_a_list_of_one_hundred_nullable_numbers() {
        let mut log = FlipLog::new();
        log.record_change(0, 2, 9);
        let json = serde_json::to_value(log).unwrap();
        let list = json.as_array().unwrap();
        assert_eq!(list.len(), 100);
        assert_eq!(list[0], serde_json::json!(9));
        assert_eq!(list[2], serde_json::Value::Null);
        let back: FlipLog = serde_json::from_value(json).unwrap();
        assert_eq!(back, log);
    }

    #[test]
    fn a_serialized_log_of_the_wrong_length_is_rejected() {
        let error = serde_json::from_str::<FlipLog>("[1, null, 3]").unwrap_err();
        assert!(error.to_string().contains("exactly 100 buckets, got 3"));
    }

    /// The percent in force at `time`: the last change at or before it, else the starting one.
    fn percent_at(start: u8, changes: &[(u8, i64)], time: i64) -> u8 {
        changes
            .iter()
            .take_while(|(_, at)| *at <= time)
            .last()
            .map_or(start, |(percent, _)| *percent)
    }

    /// Changes at strictly increasing times starting at 1.
    fn changes_strategy() -> impl Strategy<Value = Vec<(u8, i64)>> {
        prop::collection::vec((0u8..=100, 1i64..50), 0..12).prop_map(|steps| {
            let mut time = 0;
            steps
                .into_iter()
                .map(|(percent, gap)| {
                    time += gap;
                    (percent, time)
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn exact_check_never_calls_a_value_fresh_when_routing_moved_since_it_was_cached(
            start in 0u8..=100,
            changes in changes_strategy(),
            cached_at in 0i64..700,
            bucket in 0u8..100,
        ) {
            let mut log = FlipLog::new();
            let mut current = start;
            for &(percent, at) in &changes {
                log.record_change(current, percent, at);
                current = percent;
            }
            let then = percent_includes(percent_at(start, &changes, cached_at), bucket);
            let now = percent_includes(current, bucket);
            if then != now {
                prop_assert!(log.is_stale_exact(bucket, Some(cached_at)));
            }
            let ever_differed = std::iter::once(start)
                .chain(changes.iter().map(|(percent, _)| *percent))
                .any(|percent| percent_includes(percent, bucket) != now);
            if ever_differed {
                prop_assert!(log.is_stale_exact(bucket, None));
            }
        }

        #[test]
        fn exact_check_agrees_with_the_two_field_check_on_a_single_change(
            old in 0u8..=100,
            new in 0u8..=100,
            at in 0i64..1000,
            cached_at in prop::option::of(0i64..1000),
            bucket in 0u8..100,
        ) {
            let mut log = FlipLog::new();
            log.record_change(old, new, at);
            let entry = RolloutEntry { percent: new, previous_percent: old, changed_at: at };
            prop_assert_eq!(
                log.is_stale_exact(bucket, cached_at),
                is_snapshot_cache_stale(&entry, bucket, cached_at)
            );
        }
    }
}
