//! The deploy dialog's live preview: which nodes each stage would add, computed by the
//! server (`release.preview`) with the same `vf_rules` selection it runs at create (same
//! release id, same admitted fleet, same node groups), so what the operator sees is what the
//! release will do. The browser gets counts and the first few names, never the fleet.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use vf_rules::{cumulative_targets, stage_additions, NodeRef, RolloutPlan};

use crate::types::Labels;

/// The part of a node the dialog reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetNode {
    pub id: String,
    pub name: String,
    pub labels: Labels,
    /// Whether the pipeline's nodeSelector admits it.
    pub admitted: bool,
}

/// A node group a stage may name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GroupRef {
    pub id: String,
    pub name: String,
    pub criteria: Labels,
}

/// What selection reads: the environment's nodes and its node groups.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    pub nodes: Vec<FleetNode>,
    pub groups: Vec<GroupRef>,
}

impl Selection {
    /// The release's fleet: the admitted nodes.
    pub fn fleet(&self) -> Vec<NodeRef> {
        (self.nodes.iter().filter(|n| n.admitted))
            .map(|n| NodeRef {
                id: n.id.clone(),
                labels: n.labels.clone(),
            })
            .collect()
    }

    /// Names of the nodes the pipeline's nodeSelector keeps out, sorted.
    pub fn excluded_names(&self) -> Vec<String> {
        let mut names: Vec<String> = (self.nodes.iter().filter(|n| !n.admitted))
            .map(|n| n.name.clone())
            .collect();
        names.sort();
        names
    }

    fn names(&self, ids: &[String]) -> Vec<String> {
        let by_id: BTreeMap<&str, &str> = (self.nodes.iter())
            .map(|n| (n.id.as_str(), n.name.as_str()))
            .collect();
        let mut names: Vec<String> = (ids.iter())
            .map(|id| {
                by_id
                    .get(id.as_str())
                    .map_or(id.clone(), |n| (*n).to_owned())
            })
            .collect();
        names.sort();
        names
    }
}

/// The preview of a whole release: the fleet, and each stage's.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PreviewView {
    /// Nodes the pipeline's nodeSelector admits (the release fleet).
    pub admitted: usize,
    /// Nodes it keeps out, and the first of them by name.
    pub excluded: usize,
    pub excluded_sample: Vec<String>,
    pub stages: Vec<StagePreview>,
}

/// How many names a preview or a summary of nodes shows at most.
pub const SAMPLE: usize = 20;

impl PreviewView {
    /// The preview the browser gets: counts, and at most [`SAMPLE`] names per list.
    pub fn of(release_id: &str, selectors: &[Value], selection: &Selection) -> PreviewView {
        let excluded = selection.excluded_names();
        PreviewView {
            admitted: selection.nodes.iter().filter(|n| n.admitted).count(),
            excluded: excluded.len(),
            excluded_sample: excluded.into_iter().take(SAMPLE).collect(),
            stages: preview_stages(release_id, selectors, selection)
                .into_iter()
                .map(|mut p| {
                    if let StagePreview::Adds { names, .. } = &mut p {
                        names.truncate(SAMPLE);
                    }
                    p
                })
                .collect(),
        }
    }
}

/// What one stage's preview says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum StagePreview {
    /// How many nodes this stage adds and their names (sorted; the first [`SAMPLE`] once
    /// sent to the browser), and how many are targeted once it opens.
    Adds {
        names: Vec<String>,
        adds: usize,
        targeted: usize,
        fleet: usize,
    },
    /// This stage's selector is invalid: fix it to see its nodes.
    FixSelector,
    /// An earlier stage (0-based) cannot be previewed, so neither can this one.
    WaitsFor(usize),
    /// Selection itself failed, e.g. a node group that no longer exists.
    Failed(String),
}

/// One preview per selector, stages cumulative: stage n shows only what it adds to stages
/// 1..n-1. `release_id` must be the id the release will be created with.
pub fn preview_stages(
    release_id: &str,
    selectors: &[Value],
    context: &Selection,
) -> Vec<StagePreview> {
    // Selection only reads selectors, so preview the longest prefix whose selectors are
    // valid, even while a bake time or gate elsewhere is still being typed.
    let stage = |selector: &Value| json!({ "selector": selector, "bakeSeconds": 30 });
    let valid = (selectors.iter())
        .take_while(|s| RolloutPlan::validate_all(&json!({ "stages": [stage(s)] })).is_empty())
        .count();
    let prefix: Vec<Value> = selectors[..valid].iter().map(stage).collect();
    let plan = RolloutPlan::parse(&json!({ "stages": prefix })).ok();
    let fleet = context.fleet();
    let resolve = |id: &str| {
        (context.groups.iter())
            .find(|g| g.id == id)
            .map(|g| g.criteria.clone())
    };
    let mut previews = Vec::with_capacity(selectors.len());
    let mut before = Default::default();
    let mut blocked: Option<usize> = None;
    for index in 0..selectors.len() {
        if let Some(stage) = blocked {
            previews.push(StagePreview::WaitsFor(stage));
            continue;
        }
        let targets = plan
            .as_ref()
            .filter(|_| index < valid)
            .map(|plan| cumulative_targets(release_id, plan, index, &fleet, resolve));
        match targets {
            None => {
                previews.push(StagePreview::FixSelector);
                blocked = Some(index);
            }
            Some(Err(e)) => {
                previews.push(StagePreview::Failed(e.to_string()));
                blocked = Some(index);
            }
            Some(Ok(targets)) => {
                let added = stage_additions(&before, &targets);
                previews.push(StagePreview::Adds {
                    names: context.names(&added),
                    adds: added.len(),
                    targeted: targets.len(),
                    fleet: fleet.len(),
                });
                before = targets;
            }
        }
    }
    previews
}

#[cfg(test)]
mod tests {
    use super::*;
    use vf_rules::{percentage_targets, Percent};

    fn node(id: &str, wave: &str, admitted: bool) -> FleetNode {
        FleetNode {
            id: format!("id-{id}"),
            name: id.to_owned(),
            labels: [("wave".to_owned(), wave.to_owned())].into(),
            admitted,
        }
    }

    fn context() -> Selection {
        Selection {
            nodes: vec![
                node("edge-a", "0", true),
                node("edge-b", "1", true),
                node("edge-c", "0", true),
                node("edge-d", "1", true),
                node("win-1", "0", false),
            ],
            groups: vec![GroupRef {
                id: "g-wave1".into(),
                name: "Wave 1".into(),
                criteria: [("wave".to_owned(), "1".to_owned())].into(),
            }],
        }
    }

    fn adds(names: &[&str], targeted: usize) -> StagePreview {
        StagePreview::Adds {
            names: names.iter().map(|s| s.to_string()).collect(),
            adds: names.len(),
            targeted,
            fleet: 4,
        }
    }

    #[test]
    fn each_stage_shows_only_the_admitted_nodes_it_adds() {
        let previews = preview_stages(
            "rel",
            &[
                json!({"labels": {"wave": "0"}}),
                json!({"nodeGroup": "g-wave1"}),
                json!({"percentage": 100}),
            ],
            &context(),
        );
        assert_eq!(
            previews,
            vec![
                adds(&["edge-a", "edge-c"], 2),
                adds(&["edge-b", "edge-d"], 4),
                adds(&[], 4),
            ]
        );
    }

    #[test]
    fn nodes_the_node_selector_excludes_are_listed_and_never_targeted() {
        let ctx = context();
        assert_eq!(ctx.excluded_names(), vec!["win-1"]);
        let previews = preview_stages("rel", &[json!({"percentage": 100})], &ctx);
        let StagePreview::Adds { names, .. } = &previews[0] else {
            panic!("a preview")
        };
        assert!(!names.contains(&"win-1".to_owned()));
    }

    #[test]
    fn percentage_stages_rank_exactly_as_the_server_does_for_the_release_id() {
        let ctx = context();
        for release in ["0190f0e2-aaaa-7000-8000-000000000001", "another-release"] {
            let previews = preview_stages(release, &[json!({"percentage": 50})], &ctx);
            let half = Percent::from_hundredths(5000).expect("valid");
            let server: Vec<String> = percentage_targets(release, &ctx.fleet(), half);
            let expected = ctx.names(&server);
            assert_eq!(
                previews[0],
                StagePreview::Adds {
                    adds: expected.len(),
                    names: expected,
                    targeted: 2,
                    fleet: 4
                }
            );
        }
    }

    #[test]
    fn an_invalid_selector_asks_for_a_fix_and_later_stages_wait_for_it() {
        let previews = preview_stages(
            "rel",
            &[
                json!({"percentage": 25}),
                json!({"labels": {}}),
                json!({"percentage": 100}),
            ],
            &context(),
        );
        assert!(matches!(
            previews[0],
            StagePreview::Adds { targeted: 1, .. }
        ));
        assert_eq!(previews[1], StagePreview::FixSelector);
        assert_eq!(previews[2], StagePreview::WaitsFor(1));
    }

    #[test]
    fn a_missing_node_group_says_so() {
        let previews = preview_stages("rel", &[json!({"nodeGroup": "gone"})], &context());
        let StagePreview::Failed(message) = &previews[0] else {
            panic!("a failure")
        };
        assert!(message.contains("gone"));
    }

    #[test]
    fn an_empty_fleet_previews_no_nodes() {
        let previews = preview_stages("rel", &[json!({"percentage": 10})], &Selection::default());
        assert_eq!(
            previews,
            vec![StagePreview::Adds {
                names: vec![],
                adds: 0,
                targeted: 0,
                fleet: 0
            }]
        );
    }

    #[test]
    fn the_browser_gets_counts_and_a_sample_of_names() {
        let nodes = (0..50)
            .map(|i| node(&format!("n-{i:02}"), "0", i < 30))
            .collect();
        let selection = Selection {
            nodes,
            groups: vec![],
        };
        let view = PreviewView::of("rel", &[json!({"percentage": 100})], &selection);
        assert_eq!((view.admitted, view.excluded), (30, 20));
        assert_eq!(view.excluded_sample.len(), SAMPLE);
        let StagePreview::Adds { names, adds, .. } = &view.stages[0] else {
            panic!("a preview")
        };
        assert_eq!((*adds, names.len()), (30, SAMPLE));
    }
}
