//! The pure decision of one poll: given what runs and what the server serves, which pipelines
//! to start or restart, keep, hold, reject, and stop. No I/O, so every rule is a unit test.

use std::collections::{BTreeMap, BTreeSet};

use vf_protocol::PipelineConfig;

use crate::{checksum, files::PipelineId};

/// The version and checksum a pipeline runs now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub version: i64,
    pub checksum: String,
}

/// What one pipeline holds, as `plan` compares it with what is served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Current {
    /// The version running (or last started); `None` when nothing valid is applied.
    pub applied: Option<Applied>,
    /// A version the agent gave up on because it crashed repeatedly.
    pub failed: Option<Applied>,
}

/// What to do with each pipeline after a 200 from `/api/agent/config`.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// New pipelines and pipelines whose version or checksum changed: (re)start them.
    pub start: Vec<(PipelineId, PipelineConfig)>,
    /// Served exactly as running: leave the process alone.
    pub keep: Vec<String>,
    /// Served as the version that crashed repeatedly: keep what runs instead (the last good
    /// config, or nothing) and keep reporting the failure.
    pub hold: Vec<String>,
    /// Served but unusable (bad checksum or id): do not apply, report with the reason.
    pub reject: Vec<(PipelineConfig, String)>,
    /// Running but no longer served: stop them and remove their files.
    pub stop: Vec<String>,
}

/// Compares `current` (by pipeline id) with the served `desired` list. A repeated pipeline id
/// keeps its first entry.
pub fn plan(current: &BTreeMap<String, Current>, desired: &[PipelineConfig]) -> Plan {
    let mut plan = Plan::default();
    let mut seen = BTreeSet::new();
    for config in desired {
        if !seen.insert(config.pipeline_id.as_str()) {
            continue;
        }
        let id = match PipelineId::parse(&config.pipeline_id) {
            Ok(id) => id,
            Err(reason) => {
                plan.reject.push((config.clone(), reason));
                continue;
            }
        };
        if let Err(reason) = checksum::verify(&config.config_yaml, &config.checksum) {
            plan.reject.push((config.clone(), reason));
            continue;
        }
        let served = Applied {
            version: config.version,
            checksum: config.checksum.clone(),
        };
        let held = current.get(&config.pipeline_id);
        if held.is_some_and(|h| h.failed.as_ref() == Some(&served)) {
            plan.hold.push(config.pipeline_id.clone());
        } else if held.is_some_and(|h| h.applied.as_ref() == Some(&served)) {
            plan.keep.push(config.pipeline_id.clone());
        } else {
            plan.start.push((id, config.clone()));
        }
    }
    plan.stop = current
        .keys()
        .filter(|id| !seen.contains(id.as_str()))
        .cloned()
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::sha256_hex;
    use crate::test_support::config;

    fn version_of(c: &PipelineConfig) -> Applied {
        Applied {
            version: c.version,
            checksum: c.checksum.clone(),
        }
    }

    fn applied(c: &PipelineConfig) -> Current {
        Current {
            applied: Some(version_of(c)),
            failed: None,
        }
    }

    fn reverted(running: &PipelineConfig, failed: &PipelineConfig) -> Current {
        Current {
            applied: Some(version_of(running)),
            failed: Some(version_of(failed)),
        }
    }

    #[test]
    fn new_pipeline_is_started() {
        let plan = plan(&BTreeMap::new(), &[config("p1", 1, "a")]);
        assert_eq!(plan.start.len(), 1);
        assert_eq!(plan.start[0].0.as_str(), "p1");
    }

    #[test]
    fn unchanged_pipeline_is_kept() {
        let c = config("p1", 1, "a");
        let current = BTreeMap::from([("p1".to_string(), applied(&c))]);
        assert_eq!(plan(&current, &[c]).keep, ["p1"]);
    }

    #[test]
    fn new_version_restarts_the_pipeline() {
        let current = BTreeMap::from([("p1".to_string(), applied(&config("p1", 1, "a")))]);
        let plan = plan(&current, &[config("p1", 2, "b")]);
        assert_eq!(plan.start[0].1.version, 2);
        assert!(plan.keep.is_empty());
    }

    #[test]
    fn same_version_with_a_different_body_restarts_the_pipeline() {
        let current = BTreeMap::from([("p1".to_string(), applied(&config("p1", 1, "a")))]);
        assert_eq!(plan(&current, &[config("p1", 1, "b")]).start.len(), 1);
    }

    #[test]
    fn pipeline_absent_from_the_response_is_stopped() {
        let current = BTreeMap::from([
            ("p1".to_string(), applied(&config("p1", 1, "a"))),
            ("p2".to_string(), Current::default()),
        ]);
        let plan = plan(&current, &[config("p1", 1, "a")]);
        assert_eq!(plan.stop, ["p2"]);
    }

    #[test]
    fn config_with_a_wrong_checksum_is_rejected_not_started() {
        let mut c = config("p1", 1, "a");
        c.checksum = sha256_hex("tampered");
        let plan = plan(&BTreeMap::new(), &[c]);
        assert!(plan.start.is_empty());
        assert!(plan.reject[0].1.contains("checksum mismatch"));
    }

    #[test]
    fn pipeline_id_that_is_not_a_safe_file_name_is_rejected() {
        let plan = plan(&BTreeMap::new(), &[config("../x", 1, "a")]);
        assert!(plan.start.is_empty());
        assert_eq!(plan.reject.len(), 1);
    }

    #[test]
    fn previously_rejected_pipeline_served_correctly_is_started() {
        let current = BTreeMap::from([("p1".to_string(), Current::default())]);
        assert_eq!(plan(&current, &[config("p1", 1, "a")]).start.len(), 1);
    }

    #[test]
    fn version_that_crashed_repeatedly_is_held_not_restarted_while_it_is_served() {
        let (good, bad) = (config("p1", 1, "a"), config("p1", 2, "b"));
        let current = BTreeMap::from([("p1".to_string(), reverted(&good, &bad))]);
        let plan = plan(&current, &[bad]);
        assert_eq!(plan.hold, ["p1"]);
        assert!(plan.start.is_empty() && plan.keep.is_empty());
    }

    #[test]
    fn failed_version_given_up_without_a_fallback_is_held_too() {
        let bad = config("p1", 1, "a");
        let current = BTreeMap::from([("p1".to_string(), reverted(&bad, &bad))]);
        assert_eq!(plan(&current, &[bad]).hold, ["p1"]);
    }

    #[test]
    fn new_version_after_a_failed_one_is_started() {
        let (good, bad) = (config("p1", 1, "a"), config("p1", 2, "b"));
        let current = BTreeMap::from([("p1".to_string(), reverted(&good, &bad))]);
        let plan = plan(&current, &[config("p1", 3, "c")]);
        assert_eq!(plan.start[0].1.version, 3);
        assert!(plan.hold.is_empty());
    }

    #[test]
    fn failed_version_with_a_fixed_body_is_started() {
        let (good, bad) = (config("p1", 1, "a"), config("p1", 2, "b"));
        let current = BTreeMap::from([("p1".to_string(), reverted(&good, &bad))]);
        assert_eq!(plan(&current, &[config("p1", 2, "fixed")]).start.len(), 1);
    }

    #[test]
    fn server_going_back_to_the_running_good_version_keeps_it() {
        let (good, bad) = (config("p1", 1, "a"), config("p1", 2, "b"));
        let current = BTreeMap::from([("p1".to_string(), reverted(&good, &bad))]);
        let plan = plan(&current, &[good]);
        assert_eq!(plan.keep, ["p1"]);
        assert!(plan.hold.is_empty());
    }

    #[test]
    fn repeated_pipeline_id_keeps_the_first_entry() {
        let plan = plan(
            &BTreeMap::new(),
            &[config("p1", 1, "a"), config("p1", 2, "b")],
        );
        assert_eq!(plan.start.len(), 1);
        assert_eq!(plan.start[0].1.version, 1);
    }
}
