//! Node selection: which nodes of a fleet a stage (or the whole plan so far) targets.
//!
//! Percentages rank the fleet by `sha256(releaseId + ":" + nodeId)`, so the order is fixed
//! per release and a larger percentage of the same fleet always contains a smaller one: a
//! node never loses the canary as the rollout widens. Counts are exact integer ceilings.
//!
//! These functions compute targets from the live fleet. The SPEC freezes a stage's targets
//! when it starts (nodes that join later wait until the release leaves flight): the caller
//! stores [`stage_additions`] on the release row and serves from the stored ids.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::percent::Percent;
use crate::plan::{RolloutPlan, Selector};

/// The part of a node that selection reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub id: String,
    pub labels: BTreeMap<String, String>,
}

/// Why targets could not be computed; both mean the plan no longer fits the environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("node group \"{0}\" does not exist in this environment")]
    UnknownNodeGroup(String),
    #[error("stage {} does not exist: the plan has {stage_count} stages", index + 1)]
    NoSuchStage { index: usize, stage_count: usize },
}

/// Whether `labels` carries every pair of `criteria`. Empty criteria match every node, as
/// an empty node group or pipeline nodeSelector does.
pub fn labels_match(
    criteria: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    criteria
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value))
}

/// A node's place in a release's percentage order: lowercase hex
/// `sha256(releaseId + ":" + nodeId)`. Different releases shuffle the fleet differently, so
/// the same few nodes are not always first.
pub fn rank_key(release_id: &str, node_id: &str) -> String {
    hex::encode(rank_digest(release_id, node_id))
}

/// The digest [`rank_key`] spells in hex; bytes sort exactly as their lowercase hex does.
fn rank_digest(release_id: &str, node_id: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(release_id.as_bytes());
    hasher.update(b":");
    hasher.update(node_id.as_bytes());
    hasher.finalize().into()
}

/// `ceil(p * n / 100)` in integers: 7 % of 100 is 7, 0.5 % of 10 is 1, 100 % of n is n,
/// and any percentage of a non-empty fleet is at least one node.
pub fn percentage_count(p: Percent, n: usize) -> usize {
    let scaled = u128::from(p.hundredths()) * n as u128;
    // p <= 100 % so the result is at most n, which fits.
    scaled.div_ceil(10_000) as usize
}

/// The first `percentage_count(p, N)` distinct nodes of the fleet in rank order (rank key,
/// then node id), ascending.
pub fn percentage_targets(release_id: &str, fleet: &[NodeRef], p: Percent) -> Vec<String> {
    let mut ranked: Vec<([u8; 32], &str)> = fleet
        .iter()
        .map(|node| (rank_digest(release_id, &node.id), node.id.as_str()))
        .collect();
    ranked.sort_unstable();
    ranked.dedup_by(|a, b| a.1 == b.1);
    let count = percentage_count(p, ranked.len());
    ranked
        .into_iter()
        .take(count)
        .map(|(_, id)| id.to_owned())
        .collect()
}

/// The nodes one selector picks from the fleet. `resolve_group` returns a node group's label
/// criteria, or `None` when the group does not exist in the release's environment.
pub fn selector_targets(
    release_id: &str,
    selector: &Selector,
    fleet: &[NodeRef],
    resolve_group: impl Fn(&str) -> Option<BTreeMap<String, String>>,
) -> Result<BTreeSet<String>, SelectError> {
    let matching = |criteria: &BTreeMap<String, String>| {
        fleet
            .iter()
            .filter(|node| labels_match(criteria, &node.labels))
            .map(|node| node.id.clone())
            .collect()
    };
    match selector {
        Selector::Percentage(p) => Ok(percentage_targets(release_id, fleet, *p)
            .into_iter()
            .collect()),
        Selector::Labels(criteria) => Ok(matching(criteria)),
        Selector::NodeGroup(id) => resolve_group(id)
            .map(|criteria| matching(&criteria))
            .ok_or_else(|| SelectError::UnknownNodeGroup(id.clone())),
    }
}

/// Everything stages `0..=through_stage_index` target: stage n targets the union of stages
/// 1..n, so opening a stage only ever adds nodes.
pub fn cumulative_targets(
    release_id: &str,
    plan: &RolloutPlan,
    through_stage_index: usize,
    fleet: &[NodeRef],
    resolve_group: impl Fn(&str) -> Option<BTreeMap<String, String>>,
) -> Result<BTreeSet<String>, SelectError> {
    let stages = plan.stages();
    let Some(opened) = stages.get(..=through_stage_index) else {
        return Err(SelectError::NoSuchStage {
            index: through_stage_index,
            stage_count: stages.len(),
        });
    };
    let mut targets = BTreeSet::new();
    for stage in opened {
        targets.extend(selector_targets(
            release_id,
            &stage.selector,
            fleet,
            &resolve_group,
        )?);
    }
    Ok(targets)
}

/// The node ids a starting stage adds, sorted: the ones to materialise on the release row
/// and push a config change to.
pub fn stage_additions(
    already_targeted: &BTreeSet<String>,
    stage_targets: &BTreeSet<String>,
) -> Vec<String> {
    stage_targets
        .difference(already_targeted)
        .cloned()
        .collect()
}

/// The release's fleet: the environment's nodes that the pipeline's `nodeSelector` admits.
/// Selection applies before any canary logic; an empty selector admits every node.
pub fn fleet_admitted(
    node_selector: &BTreeMap<String, String>,
    mut nodes: Vec<NodeRef>,
) -> Vec<NodeRef> {
    nodes.retain(|node| labels_match(node_selector, &node.labels));
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn node(id: &str, pairs: &[(&str, &str)]) -> NodeRef {
        NodeRef {
            id: id.to_owned(),
            labels: labels(pairs),
        }
    }

    fn fleet(n: usize) -> Vec<NodeRef> {
        (0..n).map(|i| node(&format!("node-{i}"), &[])).collect()
    }

    fn pct(hundredths: u32) -> Percent {
        Percent::from_hundredths(hundredths).expect("in range")
    }

    fn ids(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn no_groups(_: &str) -> Option<BTreeMap<String, String>> {
        None
    }

    #[test]
    fn seven_percent_of_one_hundred_nodes_is_seven_nodes() {
        assert_eq!(percentage_count(pct(700), 100), 7);
        assert_eq!(percentage_targets("rel", &fleet(100), pct(700)).len(), 7);
    }

    #[test]
    fn half_a_percent_of_ten_nodes_is_one_node() {
        assert_eq!(percentage_count(pct(50), 10), 1);
        assert_eq!(percentage_targets("rel", &fleet(10), pct(50)).len(), 1);
    }

    #[test]
    fn percentage_counts_round_up_and_never_exceed_the_fleet() {
        assert_eq!(percentage_count(pct(10_000), 13), 13);
        assert_eq!(percentage_count(pct(1), 1), 1);
        assert_eq!(percentage_count(pct(3333), 3), 1);
        assert_eq!(percentage_count(pct(3334), 3), 2);
        assert_eq!(percentage_count(pct(5000), 0), 0);
        assert_eq!(percentage_count(pct(10_000), usize::MAX), usize::MAX);
    }

    #[test]
    fn the_rank_key_is_lowercase_hex_sha256_of_release_colon_node() {
        // sha256("rel-1:node-a"), computed independently with `printf 'rel-1:node-a' | sha256sum`.
        assert_eq!(
            rank_key("rel-1", "node-a"),
            "c999d7c21c82a7af68a34e11ee5fdded8cbf5cc1afbb00e77dfbffe02ac83afe"
        );
    }

    #[test]
    fn percentage_targets_are_the_lowest_rank_keys() {
        let nodes = fleet(20);
        let mut by_rank: Vec<(String, String)> = nodes
            .iter()
            .map(|n| (rank_key("rel", &n.id), n.id.clone()))
            .collect();
        by_rank.sort();
        let expected: Vec<String> = by_rank.into_iter().take(5).map(|(_, id)| id).collect();
        assert_eq!(percentage_targets("rel", &nodes, pct(2500)), expected);
    }

    #[test]
    fn duplicate_node_entries_are_counted_once() {
        let mut nodes = fleet(4);
        nodes.extend(fleet(4));
        assert_eq!(percentage_targets("rel", &nodes, pct(10_000)).len(), 4);
    }

    #[test]
    fn different_releases_pick_different_nodes() {
        let nodes = fleet(100);
        assert_ne!(
            percentage_targets("rel-a", &nodes, pct(1000)),
            percentage_targets("rel-b", &nodes, pct(1000))
        );
    }

    #[test]
    fn labels_match_every_pair_and_empty_criteria_match_everything() {
        let node_labels = labels(&[("wave", "a"), ("region", "eu")]);
        assert!(labels_match(&labels(&[("wave", "a")]), &node_labels));
        assert!(labels_match(
            &labels(&[("wave", "a"), ("region", "eu")]),
            &node_labels
        ));
        assert!(!labels_match(&labels(&[("wave", "b")]), &node_labels));
        assert!(!labels_match(
            &labels(&[("wave", "a"), ("tier", "x")]),
            &node_labels
        ));
        assert!(labels_match(&BTreeMap::new(), &node_labels));
        assert!(labels_match(&BTreeMap::new(), &BTreeMap::new()));
    }

    #[test]
    fn a_label_selector_targets_the_matching_nodes() {
        let nodes = [node("a", &[("wave", "a")]), node("b", &[("wave", "b")])];
        let selector = Selector::Labels(labels(&[("wave", "a")]));
        assert_eq!(
            selector_targets("rel", &selector, &nodes, no_groups),
            Ok(ids(&["a"]))
        );
    }

    #[test]
    fn a_node_group_selector_targets_nodes_matching_the_group_criteria() {
        let nodes = [node("a", &[("wave", "a")]), node("b", &[("wave", "b")])];
        let resolve = |id: &str| (id == "ng_b").then(|| labels(&[("wave", "b")]));
        let selector = Selector::NodeGroup("ng_b".into());
        assert_eq!(
            selector_targets("rel", &selector, &nodes, resolve),
            Ok(ids(&["b"]))
        );
    }

    #[test]
    fn an_unknown_node_group_is_an_error_naming_the_group() {
        let selector = Selector::NodeGroup("ng_gone".into());
        let err = selector_targets("rel", &selector, &fleet(3), no_groups).expect_err("unknown");
        assert_eq!(err, SelectError::UnknownNodeGroup("ng_gone".into()));
        assert!(err.to_string().contains("ng_gone"));
    }

    fn plan(stages: serde_json::Value) -> RolloutPlan {
        RolloutPlan::parse(&json!({ "stages": stages })).expect("valid plan")
    }

    #[test]
    fn cumulative_targets_union_every_stage_opened_so_far() {
        let nodes = [
            node("a", &[("wave", "a")]),
            node("b", &[("wave", "b")]),
            node("c", &[("wave", "c")]),
        ];
        let plan = plan(json!([
            {"selector": {"labels": {"wave": "a"}}, "bakeSeconds": 30},
            {"selector": {"labels": {"wave": "b"}}, "bakeSeconds": 30},
        ]));
        assert_eq!(
            cumulative_targets("rel", &plan, 0, &nodes, no_groups),
            Ok(ids(&["a"]))
        );
        assert_eq!(
            cumulative_targets("rel", &plan, 1, &nodes, no_groups),
            Ok(ids(&["a", "b"]))
        );
        assert_eq!(
            cumulative_targets("rel", &plan, 2, &nodes, no_groups),
            Err(SelectError::NoSuchStage {
                index: 2,
                stage_count: 2
            })
        );
    }

    #[test]
    fn stage_additions_are_only_the_new_nodes_sorted() {
        let already = ids(&["b", "d"]);
        let stage = ids(&["a", "b", "c", "d"]);
        assert_eq!(stage_additions(&already, &stage), vec!["a", "c"]);
        assert!(stage_additions(&stage, &already).is_empty());
    }

    #[test]
    fn the_pipeline_node_selector_admits_matching_nodes_and_empty_admits_all() {
        let nodes = [
            node("a", &[("os", "linux")]),
            node("b", &[("os", "windows")]),
        ];
        let admitted = fleet_admitted(&labels(&[("os", "linux")]), nodes.to_vec());
        assert_eq!(admitted, vec![nodes[0].clone()]);
        assert_eq!(
            fleet_admitted(&BTreeMap::new(), nodes.to_vec()),
            nodes.to_vec()
        );
    }

    proptest! {
        #[test]
        fn a_larger_percentage_contains_every_node_of_a_smaller_one(
            release in "[a-z0-9-]{1,12}",
            size in 0usize..150,
            a in 1u32..=10_000,
            b in 1u32..=10_000,
        ) {
            let nodes = fleet(size);
            let (small, large) = (pct(a.min(b)), pct(a.max(b)));
            let small: BTreeSet<String> = percentage_targets(&release, &nodes, small).into_iter().collect();
            let large: BTreeSet<String> = percentage_targets(&release, &nodes, large).into_iter().collect();
            prop_assert!(small.is_subset(&large));
        }

        #[test]
        fn cumulative_targets_only_grow_with_the_stage_index(
            release in "[a-z0-9-]{1,12}",
            waves in proptest::collection::vec(0u8..4, 0..40),
            stages in proptest::collection::vec((0u8..3, 1u32..=10_000), 1..6),
        ) {
            let nodes: Vec<NodeRef> = waves.iter().enumerate()
                .map(|(i, w)| node(&format!("n{i}"), &[("wave", &w.to_string())]))
                .collect();
            let stage_json: Vec<serde_json::Value> = stages.iter().map(|(kind, h)| {
                let selector = match kind {
                    0 => json!({"percentage": pct(*h).to_json()}),
                    1 => json!({"labels": {"wave": (h % 4).to_string()}}),
                    _ => json!({"nodeGroup": "g"}),
                };
                json!({"selector": selector, "bakeSeconds": 30})
            }).collect();
            let plan = plan(json!(stage_json));
            let resolve = |_: &str| Some(labels(&[("wave", "1")]));
            let mut previous = BTreeSet::new();
            for index in 0..stages.len() {
                let current = cumulative_targets(&release, &plan, index, &nodes, resolve)
                    .expect("all groups resolve");
                prop_assert!(previous.is_subset(&current));
                previous = current;
            }
        }
    }
}
