//! What each node is served: node selection, then the fencing decision of `vf-rules`.
//! Both config paths (vf-agent HTTP and OpAMP) call [`served_pipelines`].

use vf_rules::{labels_match, served, InFlight, Served};

use crate::fleet::NodeRow;
use crate::pipelines::{get_version, list_pipelines, PipelineRow, VersionRow};
use crate::releases::in_flight_release;
use crate::{Db, Result};

/// One pipeline of the node's environment and what the node gets of it.
#[derive(Debug, Clone)]
pub struct ServedPipeline {
    pub pipeline: PipelineRow,
    pub served: Served,
    /// The version body when `served` carries a version.
    pub version: Option<VersionRow>,
}

/// Every pipeline of the node's environment with the fencing decision for this node, read
/// from the live pipeline and release rows.
pub async fn served_pipelines(db: &Db, node: &NodeRow) -> Result<Vec<ServedPipeline>> {
    let labels = node.labels();
    let mut out = Vec::new();
    for pipeline in list_pipelines(db, &node.environment_id).await? {
        let admitted = labels_match(&pipeline.node_selector(), &labels);
        let release = in_flight_release(&db.pool, &pipeline.id).await?;
        let targeted = release.as_ref().map(|r| r.targeted()).unwrap_or_default();
        let in_flight = release.as_ref().map(|r| InFlight {
            canary_version: r.canary_version,
            previous_version: r.previous_version,
            targeted: &targeted,
        });
        let decision = served(
            &node.id,
            admitted,
            pipeline.deployed_version,
            in_flight.as_ref(),
        );
        let version = match decision.version() {
            Some(v) => Some(get_version(db, &pipeline.id, v).await?),
            None => None,
        };
        out.push(ServedPipeline {
            pipeline,
            served: decision,
            version,
        });
    }
    Ok(out)
}
