//! Reading the fleet a release selects from: the environment's nodes the pipeline's
//! nodeSelector admits, and the node groups stage selectors may name.

use std::collections::{BTreeMap, BTreeSet};

use vf_rules::{
    fleet_admitted, selector_targets, stage_additions, NodeRef, RolloutPlan, SelectError, Selector,
};

use crate::fleet::{list_node_groups, list_node_refs, Labels};
use crate::pipelines::PipelineRow;
use crate::{ControlError, Db, Result};

/// The release's fleet right now, and the environment's node groups by id.
pub struct FleetSnapshot {
    pub fleet: Vec<NodeRef>,
    pub groups: BTreeMap<String, Labels>,
}

impl FleetSnapshot {
    pub async fn read(db: &Db, pipeline: &PipelineRow) -> Result<FleetSnapshot> {
        let nodes = list_node_refs(db, &pipeline.environment_id).await?;
        let groups = list_node_groups(db, &pipeline.environment_id)
            .await?
            .into_iter()
            .map(|g| (g.id.clone(), g.criteria()))
            .collect();
        Ok(FleetSnapshot {
            fleet: fleet_admitted(&pipeline.node_selector(), nodes),
            groups,
        })
    }

    /// The nodes one stage's selector targets; `field` names the selector in errors.
    pub fn targets(
        &self,
        release_id: &str,
        selector: &Selector,
        field: &str,
    ) -> Result<BTreeSet<String>> {
        selector_targets(release_id, selector, &self.fleet, |id| {
            self.groups.get(id).cloned()
        })
        .map_err(|e| match e {
            SelectError::UnknownNodeGroup(id) => ControlError::invalid(
                format!("{field}.nodeGroup"),
                format!("node group {id} does not exist in this pipeline's environment"),
            ),
            other => ControlError::invalid(field, other.to_string()),
        })
    }

    /// The nodes stage `index` adds when it opens now: its selector's targets less every
    /// node an earlier stage took (`already`), in id order. Creating a release opens stage 1
    /// with this, advancing opens the next one with it.
    pub fn additions(
        &self,
        release_id: &str,
        plan: &RolloutPlan,
        planless: bool,
        index: usize,
        already: &BTreeSet<String>,
    ) -> Result<Vec<String>> {
        let stage = plan.stage(index).ok_or_else(|| {
            ControlError::Internal(anyhow::anyhow!("stage {index} is not in the plan"))
        })?;
        let targets = self.targets(
            release_id,
            &stage.selector,
            &selector_field(planless, index),
        )?;
        Ok(stage_additions(already, &targets))
    }
}

/// The request field that holds stage `index`'s selector, for errors.
pub fn selector_field(planless: bool, index: usize) -> String {
    if planless {
        "canarySelector".to_string()
    } else {
        format!("rolloutPlan.stages[{index}].selector")
    }
}
