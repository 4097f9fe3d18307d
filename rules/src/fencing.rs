//! Delivery fencing: the one decision of which pipeline version a node is served.
//!
//! Both config paths (the vf-agent HTTP poll and OpAMP) call [`served`], so they cannot
//! disagree. While a release is in flight a node gets the version its stage has opened and
//! nothing newer; once the release leaves flight nothing is fenced. The pipeline's
//! nodeSelector is checked first: a node it excludes never receives the pipeline at all.
//!
//! The caller builds [`InFlight::targeted`] from the live release row (plan-less canary ids
//! plus the ids of every started stage), never from a timer-driven cache, so a node polling
//! every few seconds cannot see a version early even with several server replicas.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// What one node is served for one pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The pipeline's nodeSelector excludes the node: the pipeline is absent for it.
    NotSelected,
    /// No release in flight and nothing deployed yet: the pipeline is absent.
    Undeployed,
    /// No release in flight: the deployed version.
    Deployed(i64),
    /// The node is inside the in-flight release's targets: the canary version.
    Canary(i64),
    /// The node is not targeted yet: held on the pre-canary version.
    Previous(i64),
    /// Not targeted yet and the canary is the first deploy: the pipeline is absent, which an
    /// agent reads as "stop it".
    Withheld,
}

impl Served {
    /// The version to put in the config response; `None` means leave the pipeline out.
    pub fn version(self) -> Option<i64> {
        match self {
            Served::Deployed(v) | Served::Canary(v) | Served::Previous(v) => Some(v),
            Served::NotSelected | Served::Undeployed | Served::Withheld => None,
        }
    }

    /// What kind of answer this is, without the version.
    pub fn kind(self) -> ServedKind {
        match self {
            Served::NotSelected => ServedKind::NotSelected,
            Served::Undeployed => ServedKind::Undeployed,
            Served::Deployed(_) => ServedKind::Deployed,
            Served::Canary(_) => ServedKind::Canary,
            Served::Previous(_) => ServedKind::Previous,
            Served::Withheld => ServedKind::Withheld,
        }
    }
}

/// [`Served`] without its version: the label of metrics and logs, and what the pipeline
/// page shows per node. On the wire: `not_selected`, `undeployed`, `deployed`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServedKind {
    NotSelected,
    Undeployed,
    Deployed,
    Canary,
    Previous,
    Withheld,
}

impl ServedKind {
    /// The stable label (the wire spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            ServedKind::NotSelected => "not_selected",
            ServedKind::Undeployed => "undeployed",
            ServedKind::Deployed => "deployed",
            ServedKind::Canary => "canary",
            ServedKind::Previous => "previous",
            ServedKind::Withheld => "withheld",
        }
    }

    /// For people: `not selected`, `deployed`, ...
    pub fn label(self) -> &'static str {
        match self {
            ServedKind::NotSelected => "not selected",
            other => other.as_str(),
        }
    }
}

/// The fencing-relevant part of an in-flight release (`CANARY_DEPLOYED` or `HEALTH_CHECK`).
#[derive(Debug, Clone, Copy)]
pub struct InFlight<'a> {
    pub canary_version: i64,
    /// The deployed version when the canary was minted; `None` on a first deploy.
    pub previous_version: Option<i64>,
    /// Node ids of the plan-less canary or of every stage started so far.
    pub targeted: &'a BTreeSet<String>,
}

/// The fencing decision. `admitted_by_selector` is the pipeline nodeSelector's verdict for
/// this node; `in_flight` is `None` once the release is broadened or rolled back.
pub fn served(
    node_id: &str,
    admitted_by_selector: bool,
    deployed_version: Option<i64>,
    in_flight: Option<&InFlight>,
) -> Served {
    if !admitted_by_selector {
        return Served::NotSelected;
    }
    match (in_flight, deployed_version) {
        (Some(release), _) if release.targeted.contains(node_id) => {
            Served::Canary(release.canary_version)
        }
        (Some(release), _) => release
            .previous_version
            .map_or(Served::Withheld, Served::Previous),
        (None, Some(version)) => Served::Deployed(version),
        (None, None) => Served::Undeployed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn targets(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_node_the_selector_excludes_is_never_served_even_when_targeted() {
        let targeted = targets(&["n1"]);
        let release = InFlight {
            canary_version: 3,
            previous_version: Some(2),
            targeted: &targeted,
        };
        assert_eq!(
            served("n1", false, Some(2), Some(&release)),
            Served::NotSelected
        );
        assert_eq!(served("n1", false, Some(2), None), Served::NotSelected);
    }

    #[test]
    fn a_targeted_node_gets_the_canary_version() {
        let targeted = targets(&["n1"]);
        let release = InFlight {
            canary_version: 3,
            previous_version: Some(2),
            targeted: &targeted,
        };
        assert_eq!(
            served("n1", true, Some(2), Some(&release)),
            Served::Canary(3)
        );
    }

    #[test]
    fn a_node_not_targeted_yet_is_held_on_the_previous_version() {
        let targeted = targets(&["n1"]);
        let release = InFlight {
            canary_version: 3,
            previous_version: Some(2),
            targeted: &targeted,
        };
        assert_eq!(
            served("n2", true, Some(2), Some(&release)),
            Served::Previous(2)
        );
    }

    #[test]
    fn a_first_deploy_canary_withholds_the_pipeline_from_untargeted_nodes() {
        let targeted = targets(&["n1"]);
        let release = InFlight {
            canary_version: 1,
            previous_version: None,
            targeted: &targeted,
        };
        let decision = served("n2", true, None, Some(&release));
        assert_eq!(decision, Served::Withheld);
        assert_eq!(decision.version(), None);
    }

    #[test]
    fn with_no_release_in_flight_every_admitted_node_gets_the_deployed_version() {
        assert_eq!(served("n1", true, Some(4), None), Served::Deployed(4));
    }

    #[test]
    fn with_nothing_deployed_and_no_release_the_pipeline_is_absent() {
        assert_eq!(served("n1", true, None, None), Served::Undeployed);
    }

    #[test]
    fn versions_and_kinds_label_each_outcome() {
        let all = [
            (Served::NotSelected, None, "not_selected"),
            (Served::Undeployed, None, "undeployed"),
            (Served::Deployed(4), Some(4), "deployed"),
            (Served::Canary(5), Some(5), "canary"),
            (Served::Previous(3), Some(3), "previous"),
            (Served::Withheld, None, "withheld"),
        ];
        for (decision, version, kind) in all {
            assert_eq!(decision.version(), version);
            assert_eq!(decision.kind().as_str(), kind);
        }
    }

    proptest! {
        #[test]
        fn a_node_outside_the_targets_is_never_served_the_canary(
            node in "n[0-9]{1,2}",
            targeted in proptest::collection::btree_set("n[0-9]{1,2}", 0..20),
            admitted in any::<bool>(),
            deployed in proptest::option::of(1i64..10),
            previous in proptest::option::of(1i64..10),
        ) {
            let release = InFlight { canary_version: 99, previous_version: previous, targeted: &targeted };
            let decision = served(&node, admitted, deployed, Some(&release));
            if !targeted.contains(&node) {
                prop_assert!(!matches!(decision, Served::Canary(_)));
                prop_assert_ne!(decision.version(), Some(99));
            }
        }
    }
}
