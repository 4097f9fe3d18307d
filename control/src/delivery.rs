//! What each node is served: node selection, then the fencing decision of `vf-rules`.
//! Both config paths (vf-agent HTTP and OpAMP) call [`served_pipelines`]; the pipeline page
//! calls [`served_nodes`]. All read the live pipeline and release rows.

use std::collections::BTreeSet;

use vf_rules::{labels_match, served, InFlight, Served};

use crate::fleet::NodeRow;
use crate::pipelines::{get_version, list_pipelines, PipelineRow, VersionRow};
use crate::releases::{in_flight_release, ReleaseRow};
use crate::{Db, Result};

/// One pipeline of the node's environment and what the node gets of it.
#[derive(Debug, Clone)]
pub struct ServedPipeline {
    pub pipeline: PipelineRow,
    pub served: Served,
    /// The version body when `served` carries a version.
    pub version: Option<VersionRow>,
}

/// The fencing inputs of one pipeline, read once and applied to many nodes.
struct Fence {
    release: Option<ReleaseRow>,
    targeted: BTreeSet<String>,
}

impl Fence {
    async fn read(db: &Db, pipeline: &PipelineRow) -> Result<Fence> {
        let release = in_flight_release(&db.pool, &pipeline.id).await?;
        let targeted = release.as_ref().map(|r| r.targeted()).unwrap_or_default();
        Ok(Fence { release, targeted })
    }

    fn decide(&self, pipeline: &PipelineRow, node: &NodeRow) -> Served {
        let admitted = labels_match(&pipeline.node_selector(), &node.labels());
        let in_flight = self.release.as_ref().map(|r| InFlight {
            canary_version: r.canary_version,
            previous_version: r.previous_version,
            targeted: &self.targeted,
        });
        served(
            &node.id,
            admitted,
            pipeline.deployed_version,
            in_flight.as_ref(),
        )
    }
}

/// Every pipeline of the node's environment with the fencing decision for this node.
pub async fn served_pipelines(db: &Db, node: &NodeRow) -> Result<Vec<ServedPipeline>> {
    let mut out = Vec::new();
    for pipeline in list_pipelines(db, &node.environment_id).await? {
        let decision = Fence::read(db, &pipeline).await?.decide(&pipeline, node);
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

/// What each of `nodes` is served of one pipeline.
pub async fn served_nodes(
    db: &Db,
    pipeline: &PipelineRow,
    nodes: &[NodeRow],
) -> Result<Vec<Served>> {
    let fence = Fence::read(db, pipeline).await?;
    Ok(nodes.iter().map(|n| fence.decide(pipeline, n)).collect())
}
