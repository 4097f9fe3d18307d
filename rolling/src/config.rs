//! `EdgeConfig`: the whole rollout document served at `GET /api/edge-config`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{enabled, Rollout, RolloutEntry};

/// Every rollout at once, as one JSON document:
///
/// ```json
/// {"version": 7, "generatedAt": 1711929600000,
///  "rollouts": {"v2-cache": {"global": {"percent": 50, "previousPercent": 20, "changedAt": 1},
///                            "orgs": {"org_1": {"percent": 100, "previousPercent": 50, "changedAt": 2}},
///                            "flips": [null, ...]}}}
/// ```
///
/// A rollout that is absent means "off for everybody", which is what [`EdgeConfig::empty`]
/// serves before a client's first successful load. The server owns `version` (monotonic, bumped
/// on every publish) and `generatedAt`; this crate only carries them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "EdgeConfigWire")]
pub struct EdgeConfig {
    /// Monotonic document version; clients keep the higher one.
    pub version: i64,
    /// When the server generated this document, unix ms.
    pub generated_at: i64,
    /// Rollouts by name.
    pub rollouts: BTreeMap<String, Rollout>,
}

/// The JSON shape, before each rollout learns its name from its key.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EdgeConfigWire {
    #[serde(default)]
    version: i64,
    #[serde(default)]
    generated_at: i64,
    #[serde(default)]
    rollouts: BTreeMap<String, Rollout>,
}

impl From<EdgeConfigWire> for EdgeConfig {
    fn from(wire: EdgeConfigWire) -> Self {
        let rollouts = wire
            .rollouts
            .into_iter()
            .map(|(name, mut rollout)| {
                rollout.name.clone_from(&name);
                (name, rollout)
            })
            .collect();
        EdgeConfig {
            version: wire.version,
            generated_at: wire.generated_at,
            rollouts,
        }
    }
}

impl Default for EdgeConfig {
    fn default() -> Self {
        EdgeConfig::empty()
    }
}

impl EdgeConfig {
    /// No rollouts: every rollout is off for everybody. Version 0, older than any published one.
    pub fn empty() -> EdgeConfig {
        EdgeConfig {
            version: 0,
            generated_at: 0,
            rollouts: BTreeMap::new(),
        }
    }

    /// The rollout called `name`, if the document has one (retired ones included).
    pub fn rollout(&self, name: &str) -> Option<&Rollout> {
        self.rollouts.get(name)
    }

    /// The entry governing `org` for rollout `name`; [`RolloutEntry::OFF`] if there is no such
    /// rollout.
    pub fn resolve(&self, name: &str, org: Option<&str>) -> &RolloutEntry {
        match self.rollouts.get(name) {
            Some(rollout) => rollout.resolve(org),
            None => &RolloutEntry::OFF,
        }
    }

    /// Whether a customer of `org` in `bucket` takes the new path of rollout `name`.
    pub fn enabled(&self, name: &str, org: Option<&str>, bucket: u8) -> bool {
        enabled(self.resolve(name, org), bucket)
    }

    /// Whether a value cached for rollout `name` must be evicted (see
    /// [`Rollout::is_cache_stale`]). A rollout the document has never had moved nobody.
    pub fn is_cache_stale(
        &self,
        name: &str,
        org: Option<&str>,
        bucket: u8,
        cached_at: Option<i64>,
    ) -> bool {
        self.rollouts
            .get(name)
            .is_some_and(|rollout| rollout.is_cache_stale(org, bucket, cached_at))
    }

    /// The rollout called `name`, created off if absent, for changing through its methods.
    pub fn rollout_mut(&mut self, name: &str) -> &mut Rollout {
        self.rollouts
            .entry(name.to_owned())
            .or_insert_with(|| Rollout::new(name))
    }

    /// Deletes rollout `name` at `now`, keeping it as a retired tombstone (0% everywhere, flips
    /// recorded) so caches can still evict. Returns whether such a rollout existed.
    pub fn delete_rollout(&mut self, name: &str, now: i64) -> bool {
        match self.rollouts.get_mut(name) {
            Some(rollout) => {
                rollout.retire(now);
                true
            }
            None => false,
        }
    }

    /// Rollouts that have not been deleted, for listing in the admin page.
    pub fn active_rollouts(&self) -> impl Iterator<Item = &Rollout> {
        self.rollouts
            .values()
            .filter(|rollout| !rollout.is_retired())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Percent;

    fn pct(value: u8) -> Percent {
        Percent::new(value).unwrap()
    }

    #[test]
    fn the_empty_config_turns_every_rollout_off() {
        let config = EdgeConfig::empty();
        assert!((0..100).all(|b| !config.enabled("anything", Some("org_1"), b)));
        assert_eq!(config.resolve("anything", None), &RolloutEntry::OFF);
        assert!(!config.is_cache_stale("anything", None, 3, None));
        assert_eq!(EdgeConfig::default(), config);
    }

    #[test]
    fn the_design_document_parses_and_names_its_rollouts() {
        let json = r#"{
            "version": 7,
            "generatedAt": 1711929700000,
            "rollouts": {
                "v2-cache": {
                    "global": {"percent": 50, "previousPercent": 20, "changedAt": 1711929600000},
                    "orgs": {"org_abc": {"percent": 100, "previousPercent": 50, "changedAt": 1711929600000}}
                }
            }
        }"#;
        let config: EdgeConfig = serde_json::from_str(json).unwrap();
        assert_eq!(config.version, 7);
        let rollout = config.rollout("v2-cache").unwrap();
        assert_eq!(rollout.name, "v2-cache");
        assert_eq!(rollout.flips, None);
        assert!(config.enabled("v2-cache", Some("org_abc"), 99));
        assert!(!config.enabled("v2-cache", Some("org_xyz"), 99));
        assert!(config.enabled("v2-cache", None, 49));
    }

    #[test]
    fn a_config_survives_a_json_round_trip() {
        let mut config = EdgeConfig::empty();
        config.version = 3;
        config.generated_at = 900;
        config.rollout_mut("v2-cache").set_global(pct(30), 100);
        config
            .rollout_mut("v2-cache")
            .set_org("org_1", pct(80), 200);
        config.rollout_mut("billing").set_global(pct(5), 300);
        config.delete_rollout("billing", 400);
        let json = serde_json::to_string(&config).unwrap();
        let back: EdgeConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, config);
    }

    #[test]
    fn a_percent_over_one_hundred_anywhere_rejects_the_whole_document() {
        let json = r#"{"version": 1, "generatedAt": 0, "rollouts": {"r": {
            "global": {"percent": 10, "previousPercent": 0, "changedAt": 0},
            "orgs": {"org_1": {"percent": 120, "previousPercent": 0, "changedAt": 0}}}}}"#;
        assert!(serde_json::from_str::<EdgeConfig>(json).is_err());
    }

    #[test]
    fn deleting_a_rollout_keeps_a_tombstone_that_still_evicts() {
        let mut config = EdgeConfig::empty();
        config.rollout_mut("v2-cache").set_global(pct(40), 100);
        assert!(config.delete_rollout("v2-cache", 200));
        assert!(!config.delete_rollout("missing", 200));
        assert_eq!(config.active_rollouts().count(), 0);
        assert!(!config.enabled("v2-cache", None, 10));
        assert!(config.is_cache_stale("v2-cache", None, 10, Some(150)));
        assert!(!config.is_cache_stale("v2-cache", None, 60, Some(150)));
    }
}
