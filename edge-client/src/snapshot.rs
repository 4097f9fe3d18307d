//! `RolloutSnapshot`: one request's view of every rollout, fixed when the request arrives.

use std::fmt;
use std::sync::Arc;

use vf_rolling::{bucket, EdgeConfig, RolloutEntry};

use crate::Customer;

/// Every rollout as it stood when the request arrived, for the request's customer.
///
/// It pins the whole document (an `Arc`, not a copy) together with the customer's bucket and
/// org, so every branch point and cache check of one request resolves against the same config
/// even if the store loads a new one meanwhile. Cheap to clone, as axum's `Extension`
/// extractor does.
///
/// An anonymous snapshot (no customer) has every rollout off and finds nothing stale.
#[derive(Clone)]
pub struct RolloutSnapshot {
    pinned: Arc<Pinned>,
}

struct Pinned {
    config: Arc<EdgeConfig>,
    customer: Option<Customer>,
    bucket: Option<u8>,
}

impl RolloutSnapshot {
    /// Pins `config` for `customer` (`None`: anonymous), hashing the customer id once.
    pub fn new(config: Arc<EdgeConfig>, customer: Option<Customer>) -> RolloutSnapshot {
        let bucket = customer.as_ref().map(|customer| bucket(&customer.id));
        RolloutSnapshot {
            pinned: Arc::new(Pinned {
                config,
                customer,
                bucket,
            }),
        }
    }

    /// The customer, `None` for an anonymous request.
    pub fn customer(&self) -> Option<&Customer> {
        self.pinned.customer.as_ref()
    }

    /// The customer's org, whose overrides apply.
    pub fn org(&self) -> Option<&str> {
        self.pinned.customer.as_ref()?.org.as_deref()
    }

    /// The customer's bucket, 0..=99 (`Bun.hash(id) % 100`).
    pub fn bucket(&self) -> Option<u8> {
        self.pinned.bucket
    }

    /// Version of the pinned document.
    pub fn version(&self) -> i64 {
        self.pinned.config.version
    }

    /// The pinned document.
    pub fn config(&self) -> &Arc<EdgeConfig> {
        &self.pinned.config
    }

    /// The entry governing this request's org for rollout `name`: the org's override, else the
    /// global entry; [`RolloutEntry::OFF`] for a rollout the document does not have.
    pub fn entry(&self, name: &str) -> RolloutEntry {
        *self.pinned.config.resolve(name, self.org())
    }

    /// Every rollout in the document with the entry governing this request's org.
    pub fn entries(&self) -> impl Iterator<Item = (&str, RolloutEntry)> + '_ {
        let org = self.org();
        self.pinned
            .config
            .rollouts
            .iter()
            .map(move |(name, rollout)| (name.as_str(), *rollout.resolve(org)))
    }

    /// Whether this request takes the new path of rollout `name`. False for an unknown
    /// rollout and for anonymous requests.
    pub fn enabled(&self, name: &str) -> bool {
        self.pinned
            .bucket
            .is_some_and(|bucket| self.pinned.config.enabled(name, self.org(), bucket))
    }

    /// Whether a value cached for this customer at `cached_at` (unix ms; `None` for values
    /// cached before timestamps were kept) must be evicted because the customer's routing of
    /// rollout `name` changed since. Uses the rollout's flip log as well as its last change,
    /// so removed overrides, deletions and several changes in a row are all seen.
    pub fn is_cache_stale(&self, name: &str, cached_at: impl Into<Option<i64>>) -> bool {
        self.pinned.bucket.is_some_and(|bucket| {
            self.pinned
                .config
                .is_cache_stale(name, self.org(), bucket, cached_at.into())
        })
    }
}

impl fmt::Debug for RolloutSnapshot {
    /// The customer, bucket and version; not the whole document.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RolloutSnapshot")
            .field("customer", &self.pinned.customer)
            .field("bucket", &self.pinned.bucket)
            .field("version", &self.pinned.config.version)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vf_rolling::{find_customer_in_bucket_range, Percent};

    const SET_AT: i64 = 1_000;
    const OVERRIDDEN_AT: i64 = 2_000;

    fn pct(value: u8) -> Percent {
        Percent::new(value).unwrap()
    }

    /// `v2-cache` at 50 % globally and 100 % for `org_abc`; `billing` at 10 %.
    fn config() -> Arc<EdgeConfig> {
        let mut config = EdgeConfig::empty();
        config.version = 3;
        config.rollout_mut("v2-cache").set_global(pct(50), SET_AT);
        config
            .rollout_mut("v2-cache")
            .set_org("org_abc", pct(100), OVERRIDDEN_AT);
        config.rollout_mut("billing").set_global(pct(10), SET_AT);
        Arc::new(config)
    }

    fn customer_in(min: u8, max: u8, org: Option<&str>) -> Customer {
        let customer = Customer::new(find_customer_in_bucket_range(min, max).unwrap());
        match org {
            Some(org) => customer.with_org(org),
            None => customer,
        }
    }

    #[test]
    fn the_snapshot_holds_the_customers_bucket_and_org() {
        let snapshot = RolloutSnapshot::new(
            config(),
            Some(Customer::new("cus_abc123").with_org("org_x")),
        );
        assert_eq!(snapshot.bucket(), Some(63));
        assert_eq!(snapshot.org(), Some("org_x"));
        assert_eq!(
            snapshot.customer().map(|c| c.id.as_str()),
            Some("cus_abc123")
        );
        assert_eq!(snapshot.version(), 3);
    }

    #[test]
    fn every_rollout_resolves_to_the_entry_governing_the_org() {
        let snapshot = RolloutSnapshot::new(config(), Some(customer_in(0, 99, Some("org_abc"))));
        let entries: Vec<(&str, u8)> = snapshot
            .entries()
            .map(|(name, entry)| (name, entry.percent))
            .collect();
        assert_eq!(entries, vec![("billing", 10), ("v2-cache", 100)]);
        assert_eq!(snapshot.entry("v2-cache").previous_percent, 50);
        assert_eq!(snapshot.entry("v2-cache").changed_at, OVERRIDDEN_AT);
        assert_eq!(snapshot.entry("missing"), RolloutEntry::OFF);
    }

    #[test]
    fn an_org_override_turns_the_rollout_on_for_a_customer_the_global_percent_leaves_off() {
        let high = Customer::new(find_customer_in_bucket_range(50, 99).unwrap());
        let with_override = RolloutSnapshot::new(config(), Some(high.clone().with_org("org_abc")));
        let without = RolloutSnapshot::new(config(), Some(high.clone().with_org("org_other")));
        let no_org = RolloutSnapshot::new(config(), Some(high));
        assert!(with_override.enabled("v2-cache"));
        assert!(!without.enabled("v2-cache"));
        assert!(!no_org.enabled("v2-cache"));
    }

    #[test]
    fn enabled_follows_the_bucket_under_the_global_percent() {
        let low = RolloutSnapshot::new(config(), Some(customer_in(0, 9, None)));
        let middle = RolloutSnapshot::new(config(), Some(customer_in(10, 49, None)));
        let high = RolloutSnapshot::new(config(), Some(customer_in(50, 99, None)));
        assert!(low.enabled("v2-cache") && low.enabled("billing"));
        assert!(middle.enabled("v2-cache") && !middle.enabled("billing"));
        assert!(!high.enabled("v2-cache") && !high.enabled("billing"));
        assert!(!low.enabled("never-created"));
    }

    #[test]
    fn an_anonymous_snapshot_has_every_rollout_off_and_nothing_stale() {
        let snapshot = RolloutSnapshot::new(config(), None);
        assert_eq!(snapshot.bucket(), None);
        assert!(!snapshot.enabled("v2-cache"));
        assert!(!snapshot.enabled("billing"));
        assert!(!snapshot.is_cache_stale("v2-cache", None));
        // Entries still say which level governs (the global one).
        assert_eq!(snapshot.entry("v2-cache").percent, 50);
    }

    #[test]
    fn a_value_cached_before_the_customer_crossed_the_boundary_is_stale() {
        // billing went 0 -> 10 at SET_AT: buckets 0..=9 moved to the new path.
        let moved = RolloutSnapshot::new(config(), Some(customer_in(0, 9, None)));
        let unmoved = RolloutSnapshot::new(config(), Some(customer_in(10, 99, None)));
        assert!(moved.is_cache_stale("billing", SET_AT - 1));
        assert!(!moved.is_cache_stale("billing", SET_AT));
        assert!(moved.is_cache_stale("billing", None));
        assert!(!unmoved.is_cache_stale("billing", SET_AT - 1));
        assert!(!unmoved.is_cache_stale("billing", None));
        assert!(!moved.is_cache_stale("never-created", None));
    }

    #[test]
    fn the_org_override_decides_staleness_for_its_customers() {
        // org_abc went 50 -> 100 at OVERRIDDEN_AT: a high bucket crossed then, not before.
        let high = RolloutSnapshot::new(config(), Some(customer_in(50, 99, Some("org_abc"))));
        assert!(high.is_cache_stale("v2-cache", OVERRIDDEN_AT - 1));
        assert!(!high.is_cache_stale("v2-cache", OVERRIDDEN_AT));
    }

    #[test]
    fn removing_an_override_makes_values_cached_under_it_stale_through_the_snapshot() {
        let mut config = (*config()).clone();
        let removed_at = 3_000;
        config
            .rollout_mut("v2-cache")
            .remove_org("org_abc", removed_at);
        let high =
            RolloutSnapshot::new(Arc::new(config), Some(customer_in(50, 99, Some("org_abc"))));
        assert!(!high.enabled("v2-cache"));
        // The global entry's own fields (0 -> 50 at SET_AT) say nothing about bucket 50+;
        // the flip log does.
        assert!(high.is_cache_stale("v2-cache", removed_at - 1));
        assert!(!high.is_cache_stale("v2-cache", removed_at));
    }

    #[tokio::test]
    async fn a_snapshot_keeps_its_config_when_the_store_loads_a_new_one() {
        let store = crate::EdgeConfigStore::from_static((*config()).clone());
        let customer = customer_in(50, 99, None);
        let snapshot = RolloutSnapshot::new(store.current(), Some(customer.clone()));
        let mut everyone = (*config()).clone();
        everyone.version = 4;
        everyone.rollout_mut("v2-cache").set_global(pct(100), 5_000);
        store.install(everyone);
        assert!(!snapshot.enabled("v2-cache"));
        assert!(!snapshot.is_cache_stale("v2-cache", 4_000));
        assert_eq!(snapshot.version(), 3);
        let next = RolloutSnapshot::new(store.current(), Some(customer));
        assert!(next.enabled("v2-cache"));
        assert!(next.is_cache_stale("v2-cache", 4_000));
    }
}
