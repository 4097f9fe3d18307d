//! `Rollout`: a named global entry with per-org overrides, and the operations that change it
//! while keeping its flip log truthful.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{change_percent, enabled, is_snapshot_cache_stale, FlipLog, Percent, RolloutEntry};

/// One rollout as published under `rollouts.<name>` in the edge config.
///
/// The name is the key in [`crate::EdgeConfig::rollouts`] and is not repeated in the JSON; it
/// is filled in when a whole config is deserialized.
///
/// Change it only through its methods: each one goes through [`change_percent`] and records the
/// buckets that flip in `flips`. The log is shared by the global entry and every override, so a
/// change for one org also marks those buckets for the others; that can only evict more, never
/// miss a flip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// The rollout's name, e.g. `v2-cache`.
    #[serde(skip)]
    pub name: String,
    /// Applies to every org without an override.
    pub global: RolloutEntry,
    /// Per-org overrides; an override wins over `global`.
    #[serde(default)]
    pub orgs: BTreeMap<String, RolloutEntry>,
    /// Last flip per bucket. `None` in documents written before the log existed; the first
    /// change through a method starts one seeded from the current entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flips: Option<FlipLog>,
    /// When the rollout was deleted. A deleted rollout stays in the document at 0% everywhere,
    /// so caches can still see that its customers moved; setting a percent again revives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<i64>,
}

impl Rollout {
    /// A rollout that is off for everybody and has never changed.
    pub fn new(name: impl Into<String>) -> Rollout {
        Rollout {
            name: name.into(),
            global: RolloutEntry::OFF,
            orgs: BTreeMap::new(),
            flips: Some(FlipLog::new()),
            retired_at: None,
        }
    }

    /// The entry that governs `org`: its override if it has one, else the global entry.
    pub fn resolve(&self, org: Option<&str>) -> &RolloutEntry {
        org.and_then(|org| self.orgs.get(org))
            .unwrap_or(&self.global)
    }

    /// Whether a customer of `org` in `bucket` takes the new path.
    pub fn enabled_for(&self, org: Option<&str>, bucket: u8) -> bool {
        enabled(self.resolve(org), bucket)
    }

    /// Whether the deleted-rollout tombstone is set.
    pub fn is_retired(&self) -> bool {
        self.retired_at.is_some()
    }

    /// Whether a value cached at `cached_at` for a customer of `org` in `bucket` must be
    /// evicted: stale under the two-field check of the governing entry, or under the flip log
    /// (which also sees earlier changes, removed overrides and deletion).
    pub fn is_cache_stale(&self, org: Option<&str>, bucket: u8, cached_at: Option<i64>) -> bool {
        is_snapshot_cache_stale(self.resolve(org), bucket, cached_at)
            || self
                .flips
                .is_some_and(|log| log.is_stale_exact(bucket, cached_at))
    }

    /// Sets the global percent at `now`. Orgs with overrides keep routing by their override.
    pub fn set_global(&mut self, percent: Percent, now: i64) {
        let old = self.global.percent;
        self.flip_log().record_change(old, percent.get(), now);
        self.global = change_percent(&self.global, percent, now);
        self.retired_at = None;
    }

    /// Sets `org`'s override at `now`. Creating an override is a change from the percent the
    /// org followed until now (the global one), so that becomes its `previous_percent`.
    pub fn set_org(&mut self, org: &str, percent: Percent, now: i64) {
        let before = *self.resolve(Some(org));
        let after = change_percent(&before, percent, now);
        self.flip_log()
            .record_change(before.percent, percent.get(), now);
        self.orgs.insert(org.to_owned(), after);
        self.retired_at = None;
    }

    /// Removes `org`'s override at `now`, returning it. The org's customers move to the global
    /// percent, which the global entry's own fields cannot express, so the move is recorded in
    /// the flip log.
    pub fn remove_org(&mut self, org: &str, now: i64) -> Option<RolloutEntry> {
        let removed = *self.orgs.get(org)?;
        let fallback = self.global.percent;
        self.flip_log()
            .record_removal(removed.percent, fallback, now);
        self.orgs.remove(org);
        Some(removed)
    }

    /// Deletes the rollout at `now`: every override is dropped and the global entry goes to 0%,
    /// with every bucket that was on (for any org) recorded as flipped.
    pub fn retire(&mut self, now: i64) {
        let overrides: Vec<u8> = self.orgs.values().map(|entry| entry.percent).collect();
        let global = self.global.percent;
        let log = self.flip_log();
        for percent in overrides {
            log.record_deletion(percent, now);
        }
        log.record_deletion(global, now);
        self.orgs.clear();
        self.global = change_percent(&self.global, Percent::ZERO, now);
        self.retired_at = Some(now);
    }

    /// The flip log, started if this rollout predates it. A new log is seeded with the last
    /// change of every entry, so it never knows less than the two-field check does; callers
    /// take it before changing any entry so the seed sees the entries as they were.
    fn flip_log(&mut self) -> &mut FlipLog {
        let global = self.global;
        let orgs = &self.orgs;
        self.flips.get_or_insert_with(|| {
            let mut log = FlipLog::new();
            for entry in std::iter::once(&global).chain(orgs.values()) {
                log.record_change(entry.previous_percent, entry.percent, entry.changed_at);
            }
            log
        })
    }
}

/// The entry that governs `org` in `rollout`: the org's override wins over the global entry.
pub fn resolve<'a>(rollout: &'a Rollout, org: Option<&str>) -> &'a RolloutEntry {
    rollout.resolve(org)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pct(value: u8) -> Percent {
        Percent::new(value).unwrap()
    }

    fn rollout_with_override() -> Rollout {
        let mut rollout = Rollout::new("v2-cache");
        rollout.set_global(pct(20), 100);
        rollout.set_org("org_abc", pct(100), 200);
        rollout
    }

    #[test]
    fn an_org_override_wins_over_the_global_entry() {
        let rollout = rollout_with_override();
        assert_eq!(resolve(&rollout, Some("org_abc")).percent, 100);
        assert_eq!(resolve(&rollout, Some("org_other")).percent, 20);
        assert_eq!(resolve(&rollout, None).percent, 20);
        assert!(rollout.enabled_for(Some("org_abc"), 90));
        assert!(!rollout.enabled_for(Some("org_other"), 90));
    }

    #[test]
    fn a_new_override_remembers_the_global_percent_as_its_previous_one() {
        let rollout = rollout_with_override();
        assert_eq!(
            rollout.orgs["org_abc"],
            RolloutEntry {
                percent: 100,
                previous_percent: 20,
                changed_at: 200,
            }
        );
    }

    #[test]
    fn changing_the_global_percent_goes_through_change_percent() {
        let mut rollout = Rollout::new("v2-cache");
        rollout.set_global(pct(20), 100);
        rollout.set_global(pct(50), 300);
        assert_eq!(
            rollout.global,
            RolloutEntry {
                percent: 50,
                previous_percent: 20,
                changed_at: 300,
            }
        );
    }

    #[test]
    fn removing_an_override_makes_values_cached_under_it_stale() {
        let mut rollout = rollout_with_override();
        assert!(!rollout.is_cache_stale(Some("org_abc"), 90, Some(250)));
        let removed = rollout.remove_org("org_abc", 400);
        assert_eq!(removed.map(|entry| entry.percent), Some(100));
        // Bucket 90 was on under the 100% override and is off under the 20% global entry; the
        // global entry's own fields say nothing about that move, the flip log does.
        assert!(!is_snapshot_cache_stale(
            rollout.resolve(Some("org_abc")),
            90,
            Some(250)
        ));
        assert!(rollout.is_cache_stale(Some("org_abc"), 90, Some(250)));
        assert!(!rollout.is_cache_stale(Some("org_abc"), 90, Some(400)));
        assert!(!rollout.is_cache_stale(Some("org_abc"), 10, Some(250)));
    }

    #[test]
    fn removing_an_override_that_does_not_exist_changes_nothing() {
        let mut rollout = rollout_with_override();
        let before = rollout.clone();
        assert_eq!(rollout.remove_org("org_missing", 400), None);
        assert_eq!(rollout, before);
    }

    #[test]
    fn retiring_a_rollout_turns_everybody_off_and_marks_who_moved() {
        let mut rollout = rollout_with_override();
        rollout.retire(500);
        assert!(rollout.is_retired());
        assert!(rollout.orgs.is_empty());
        assert!((0..100).all(|b| !rollout.enabled_for(Some("org_abc"), b)));
        assert!(rollout.is_cache_stale(Some("org_abc"), 90, Some(450)));
        assert!(rollout.is_cache_stale(None, 10, Some(450)));
        assert!(!rollout.is_cache_stale(None, 10, Some(500)));
    }

    #[test]
    fn setting_a_percent_revives_a_retired_rollout() {
        let mut rollout = rollout_with_override();
        rollout.retire(500);
        rollout.set_global(pct(10), 600);
        assert!(!rollout.is_retired());
        assert_eq!(rollout.global.previous_percent, 0);
    }

    #[test]
    fn a_rollout_without_a_flip_log_starts_one_from_its_entries() {
        let mut legacy = Rollout {
            name: "legacy".to_owned(),
            global: RolloutEntry {
                percent: 50,
                previous_percent: 20,
                changed_at: 100,
            },
            orgs: BTreeMap::new(),
            flips: None,
            retired_at: None,
        };
        assert!(legacy.is_cache_stale(None, 30, Some(50)));
        legacy.set_global(pct(60), 200);
        let log = legacy.flips.unwrap();
        assert_eq!(log.flipped_at[30], Some(100));
        assert_eq!(log.flipped_at[55], Some(200));
        assert!(legacy.is_cache_stale(None, 30, Some(50)));
    }

    #[test]
    fn removing_a_legacy_override_keeps_what_its_own_last_change_moved() {
        let mut orgs = BTreeMap::new();
        orgs.insert(
            "org_abc".to_owned(),
            RolloutEntry {
                percent: 50,
                previous_percent: 0,
                changed_at: 100,
            },
        );
        let mut legacy = Rollout {
            name: "legacy".to_owned(),
            global: RolloutEntry {
                percent: 50,
                previous_percent: 50,
                changed_at: 10,
            },
            orgs,
            flips: None,
            retired_at: None,
        };
        // Cached at 50, when org_abc's override was still 0%: bucket 10 was off, and is on now.
        assert!(legacy.is_cache_stale(Some("org_abc"), 10, Some(50)));
        legacy.remove_org("org_abc", 200);
        assert!(legacy.enabled_for(Some("org_abc"), 10));
        assert!(legacy.is_cache_stale(Some("org_abc"), 10, Some(50)));
        assert!(!legacy.is_cache_stale(Some("org_abc"), 10, Some(100)));
    }

    #[test]
    fn rollout_json_omits_the_name_and_an_absent_tombstone() {
        let rollout = rollout_with_override();
        let json = serde_json::to_value(&rollout).unwrap();
        assert!(json.get("name").is_none());
        assert!(json.get("retiredAt").is_none());
        assert_eq!(json["orgs"]["org_abc"]["previousPercent"], 20);
        assert_eq!(json["flips"].as_array().map(Vec::len), Some(100));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Global(u8),
        Org(usize, u8),
        Remove(usize),
        Retire,
    }

    const ORGS: [&str; 3] = ["org_a", "org_b", "org_c"];

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..=100).prop_map(Op::Global),
            (0..ORGS.len(), 0u8..=100).prop_map(|(org, p)| Op::Org(org, p)),
            (0..ORGS.len()).prop_map(Op::Remove),
            Just(Op::Retire),
        ]
    }

    fn apply(rollout: &mut Rollout, op: &Op, at: i64) {
        match *op {
            Op::Global(p) => rollout.set_global(pct(p), at),
            Op::Org(org, p) => rollout.set_org(ORGS[org], pct(p), at),
            Op::Remove(org) => {
                rollout.remove_org(ORGS[org], at);
            }
            Op::Retire => rollout.retire(at),
        }
    }

    proptest! {
        #[test]
        fn no_org_ever_sees_a_value_cached_under_other_routing_as_fresh(
            ops in prop::collection::vec(op_strategy(), 0..16),
            cache_step in 0usize..17,
            bucket in 0u8..100,
            legacy in any::<bool>(),
        ) {
            // Op i happens at time 10 * (i + 1); the value is cached right after step
            // `cache_step` (at 10 * cache_step + 5).
            let mut rollout = Rollout::new("prop");
            if legacy {
                // A document from before flip logs existed.
                rollout.flips = None;
            }
            let mut at_cache_time = rollout.clone();
            for (i, op) in ops.iter().enumerate() {
                if i == cache_step {
                    at_cache_time = rollout.clone();
                }
                apply(&mut rollout, op, 10 * (i as i64 + 1));
            }
            if cache_step >= ops.len() {
                at_cache_time = rollout.clone();
            }
            let cached_at = 10 * cache_step as i64 + 5;
            for org in ORGS.iter().map(|org| Some(*org)).chain([None]) {
                if at_cache_time.enabled_for(org, bucket) != rollout.enabled_for(org, bucket) {
                    prop_assert!(rollout.is_cache_stale(org, bucket, Some(cached_at)));
                    prop_assert!(rollout.is_cache_stale(org, bucket, None));
                }
            }
        }
    }
}
