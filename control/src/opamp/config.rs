//! The remote config a collector is offered: one config-map entry per served pipeline,
//! named by the pipeline's name, and a hash that only the entries decide.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use vf_rules::Served;

use super::proto::{AgentConfigFile, AgentConfigMap, AgentRemoteConfig};
use crate::delivery::ServedPipeline;

/// The content type of every entry: pipeline bodies are YAML.
pub const CONTENT_TYPE_YAML: &str = "text/yaml";

/// One pipeline version inside an offer: what a status report for the offer's hash is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfferedPipeline {
    pub pipeline_id: String,
    pub name: String,
    pub version: i64,
    pub checksum: String,
}

/// A remote config for one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// Pipeline name -> YAML body.
    pub entries: BTreeMap<String, String>,
    pub pipelines: Vec<OfferedPipeline>,
    pub hash: [u8; 32],
}

/// sha256 over the entries in name order: name, a 0 byte, body, a 0 byte, and so on. The
/// same pipelines at the same versions give the same hash on every replica and restart.
pub fn config_hash(entries: &BTreeMap<String, String>) -> [u8; 32] {
    let mut h = Sha256::new();
    for (name, body) in entries {
        h.update(name.as_bytes());
        h.update([0u8]);
        h.update(body.as_bytes());
        h.update([0u8]);
    }
    h.finalize().into()
}

/// The offer for a node from what delivery serves it. `holds_our_config` says the agent
/// last reported a config of ours with pipelines in it.
///
/// With at least one pipeline served, the offer carries them. With none, an empty config
/// is offered only when there is something to stop: a pipeline withheld from the node or
/// undeployed, or pipelines the agent still runs from an earlier offer (its labels or a
/// node selector changed). An agent that never had anything of ours and is served nothing
/// is left alone (`None`), so a collector's own config is not wiped for no reason.
pub fn build_offer(served: &[ServedPipeline], holds_our_config: bool) -> Option<Offer> {
    let mut entries = BTreeMap::new();
    let mut pipelines = Vec::new();
    for s in served {
        if let Some(v) = &s.version {
            entries.insert(s.pipeline.name.clone(), v.config_yaml.clone());
            pipelines.push(OfferedPipeline {
                pipeline_id: s.pipeline.id.clone(),
                name: s.pipeline.name.clone(),
                version: v.version,
                checksum: v.checksum.clone(),
            });
        }
    }
    let stops_something = served
        .iter()
        .any(|s| matches!(s.served, Served::Withheld | Served::Undeployed));
    if pipelines.is_empty() && !stops_something && !holds_our_config {
        return None;
    }
    pipelines.sort_by(|a, b| a.name.cmp(&b.name));
    let hash = config_hash(&entries);
    Some(Offer {
        entries,
        pipelines,
        hash,
    })
}

impl Offer {
    pub fn hash_hex(&self) -> String {
        hex::encode(self.hash)
    }

    /// The `remote_config` field of a ServerToAgent.
    pub fn to_remote_config(&self) -> AgentRemoteConfig {
        let config_map = self
            .entries
            .iter()
            .map(|(name, body)| {
                (
                    name.clone(),
                    AgentConfigFile {
                        body: body.clone().into_bytes(),
                        content_type: CONTENT_TYPE_YAML.to_string(),
                    },
                )
            })
            .collect();
        AgentRemoteConfig {
            config: Some(AgentConfigMap { config_map }),
            config_hash: self.hash.to_vec(),
        }
    }
}

/// What the server knows of the config an agent holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentConfigState<'a> {
    /// The last `remote_config_status.last_remote_config_hash` the agent reported,
    /// whatever status came with it.
    pub reported_hash: Option<&'a str>,
    /// The hash of the last offer sent to it.
    pub offered_hash: Option<&'a str>,
    /// The agent reports remote config status (ReportsRemoteConfig).
    pub reports_status: bool,
}

/// The resend rule: offer the config only when the agent's reported hash differs. An agent
/// that reports a failure keeps that hash and is not offered the same config again (no
/// resend loop); it gets the next one that differs. An agent that never reports status is
/// offered each config once.
pub fn should_send(offer_hash_hex: &str, state: AgentConfigState<'_>) -> bool {
    if state.reported_hash == Some(offer_hash_hex) {
        return false;
    }
    state.reports_status || state.offered_hash != Some(offer_hash_hex)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipelines::{PipelineRow, VersionRow};

    fn pipeline(name: &str, served: Served, body: Option<&str>) -> ServedPipeline {
        ServedPipeline {
            pipeline: std::sync::Arc::new(PipelineRow {
                id: format!("id-{name}"),
                environment_id: "env".into(),
                name: name.into(),
                node_selector: "{}".into(),
                log_level: None,
                deployed_version: None,
                row_version: 1,
                created_at: 0,
                updated_at: 0,
            }),
            served,
            version: body.map(|b| {
                std::sync::Arc::new(VersionRow {
                    pipeline_id: format!("id-{name}"),
                    version: served.version().unwrap_or(0),
                    config_yaml: b.into(),
                    checksum: crate::ids::sha256_hex(b.as_bytes()),
                    changelog: String::new(),
                    author: "t".into(),
                    created_at: 0,
                })
            }),
        }
    }

    #[test]
    fn the_hash_is_sha256_over_sorted_names_and_bodies_with_zero_separators() {
        let entries = BTreeMap::from([
            ("b".to_string(), "two".to_string()),
            ("a".to_string(), "one".to_string()),
        ]);
        let expected: [u8; 32] = Sha256::digest(b"a\0one\0b\0two\0").into();
        assert_eq!(config_hash(&entries), expected);
        // The separators keep ("ab", "c") and ("a", "bc") apart.
        let x = BTreeMap::from([("ab".to_string(), "c".to_string())]);
        let y = BTreeMap::from([("a".to_string(), "bc".to_string())]);
        assert_ne!(config_hash(&x), config_hash(&y));
    }

    #[test]
    fn an_offer_has_one_yaml_entry_per_served_pipeline_name_and_a_deterministic_hash() {
        let served = vec![
            pipeline("metrics", Served::Canary(3), Some("receivers: {}\n")),
            pipeline("logs", Served::Deployed(1), Some("exporters: {}\n")),
            pipeline("traces", Served::NotSelected, None),
        ];
        let offer = build_offer(&served, false).unwrap();
        let names: Vec<&str> = offer.pipelines.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["logs", "metrics"]);
        assert_eq!(offer.pipelines[1].version, 3);
        let mut reversed = served.clone();
        reversed.reverse();
        assert_eq!(build_offer(&reversed, false).unwrap().hash, offer.hash);

        let remote = offer.to_remote_config();
        assert_eq!(remote.config_hash, offer.hash.to_vec());
        let map = remote.config.unwrap().config_map;
        assert_eq!(map["logs"].body, b"exporters: {}\n");
        assert_eq!(map["logs"].content_type, "text/yaml");
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn a_changed_body_changes_the_hash() {
        let a = build_offer(
            &[pipeline("logs", Served::Deployed(1), Some("a: 1\n"))],
            false,
        );
        let b = build_offer(
            &[pipeline("logs", Served::Deployed(2), Some("a: 2\n"))],
            false,
        );
        assert_ne!(a.unwrap().hash, b.unwrap().hash);
    }

    #[test]
    fn an_empty_config_is_offered_when_every_pipeline_is_withheld_or_undeployed() {
        for served in [Served::Withheld, Served::Undeployed] {
            let offer = build_offer(&[pipeline("logs", served, None)], false).unwrap();
            assert!(offer.entries.is_empty());
            assert_eq!(offer.hash, <[u8; 32]>::from(Sha256::digest(b"")));
        }
    }

    #[test]
    fn nothing_is_offered_to_a_fresh_agent_that_is_served_nothing() {
        assert_eq!(build_offer(&[], false), None);
        assert_eq!(
            build_offer(&[pipeline("logs", Served::NotSelected, None)], false),
            None
        );
    }

    #[test]
    fn an_agent_running_our_pipelines_is_told_to_stop_them_when_deselected() {
        let offer = build_offer(&[pipeline("logs", Served::NotSelected, None)], true).unwrap();
        assert!(offer.entries.is_empty());
    }

    #[test]
    fn the_config_is_resent_only_while_the_reported_hash_differs() {
        let reported = |h| AgentConfigState {
            reported_hash: h,
            offered_hash: Some("new"),
            reports_status: true,
        };
        assert!(should_send("new", reported(None)));
        assert!(should_send("new", reported(Some("old"))));
        assert!(!should_send("new", reported(Some("new"))));
    }

    #[test]
    fn a_failed_config_is_not_resent_once_its_hash_was_reported() {
        // The agent reported FAILED for "bad": the hash is what counts, not the status.
        let state = AgentConfigState {
            reported_hash: Some("bad"),
            offered_hash: Some("bad"),
            reports_status: true,
        };
        assert!(!should_send("bad", state));
        assert!(should_send("fixed", state));
    }

    #[test]
    fn an_agent_that_never_reports_status_gets_each_config_once() {
        let state = |offered| AgentConfigState {
            reported_hash: None,
            offered_hash: offered,
            reports_status: false,
        };
        assert!(should_send("h1", state(None)));
        assert!(!should_send("h1", state(Some("h1"))));
        assert!(should_send("h2", state(Some("h1"))));
    }
}
