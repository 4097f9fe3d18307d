//! What each node is served: node selection, then the fencing decision of `vf-rules`.
//! Both config paths (vf-agent HTTP and OpAMP) call [`served_pipelines`]; the pipeline page
//! calls [`served_nodes`]. All read the live pipeline and release rows; a node's answer
//! reads them from one snapshot ([`crate::Db::snapshot`]).
//!
//! An in-flight release whose stored state does not parse still fences: every node of its
//! pipeline is served the previous version (the targeted set cannot be read), and that is
//! logged and counted (`vectorflow_release_state_unreadable_total`), never silent.

use std::collections::BTreeSet;

use vf_rules::{labels_match, served, InFlight, Served};

use crate::fleet::NodeRow;
use crate::pipelines::{pipelines_in, version_in, PipelineRow, VersionRow};
use crate::releases::{in_flight_row, ReadBy};
use crate::{Control, Result};

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
    /// `(canary version, previous version)` of the in-flight release.
    release: Option<(i64, Option<i64>)>,
    targeted: BTreeSet<String>,
}

impl Fence {
    async fn read(
        ctl: &Control,
        conn: impl sqlx::AnyExecutor<'_>,
        pipeline: &PipelineRow,
    ) -> Result<Fence> {
        let Some(row) = in_flight_row(conn, &pipeline.id).await? else {
            return Ok(Fence {
                release: None,
                targeted: BTreeSet::new(),
            });
        };
        let versions = Some((row.canary_version, row.previous_version));
        let targeted = match row.parse() {
            Ok(release) => release.targeted(),
            Err(e) => {
                e.report(ctl, ReadBy::Fencing);
                BTreeSet::new()
            }
        };
        Ok(Fence {
            release: versions,
            targeted,
        })
    }

    fn decide(&self, pipeline: &PipelineRow, node: &NodeRow) -> Served {
        let admitted = labels_match(&pipeline.node_selector(), &node.labels());
        let in_flight = self
            .release
            .map(|(canary_version, previous_version)| InFlight {
                canary_version,
                previous_version,
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

/// Every pipeline of the node's environment with the fencing decision for this node, all
/// read from one snapshot: a release completing or rolling back while the answer is being
/// assembled is seen whole or not at all, so a node never sees its version step back or a
/// pipeline vanish for one poll.
pub async fn served_pipelines(ctl: &Control, node: &NodeRow) -> Result<Vec<ServedPipeline>> {
    let mut snapshot = ctl.db.snapshot().await?;
    let mut out = Vec::new();
    for pipeline in pipelines_in(&mut *snapshot, &node.environment_id).await? {
        let decision = Fence::read(ctl, &mut *snapshot, &pipeline)
            .await?
            .decide(&pipeline, node);
        let version = match decision.version() {
            Some(v) => Some(version_in(&mut *snapshot, &pipeline.id, v).await?),
            None => None,
        };
        out.push(ServedPipeline {
            pipeline,
            served: decision,
            version,
        });
    }
    snapshot.commit().await?;
    Ok(out)
}

/// What each of `nodes` is served of one pipeline.
pub async fn served_nodes(
    ctl: &Control,
    pipeline: &PipelineRow,
    nodes: &[NodeRow],
) -> Result<Vec<Served>> {
    let fence = Fence::read(ctl, &ctl.db.pool, pipeline).await?;
    Ok(nodes.iter().map(|n| fence.decide(pipeline, n)).collect())
}
