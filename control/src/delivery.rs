//! What each node is served: node selection, then the fencing decision of `vf-rules`.
//! Both config paths (vf-agent HTTP and OpAMP) call [`served_pipelines`]; the pipeline page
//! calls [`served_nodes`]. All read the live pipeline and release rows, and a node's answer
//! reads them as of one instant.
//!
//! A poll reads the environment's pipelines together with the head of each one's in-flight
//! release (id and row version) in one statement. What is costly to read and never changes
//! for a given key comes from [`DeliveryCache`]: a release's targeted set at one row version
//! (every transition bumps the row version, so a cached set is used only while the poll's
//! own snapshot shows that very version: no timer, correct across replicas), and version
//! bodies (immutable). So a poll neither reads gate evaluations nor parses stage JSON, and
//! deciding a node's membership is a lookup in a set.
//!
//! An in-flight release whose stored state does not parse still fences: every node of its
//! pipeline is served the previous version (the targeted set cannot be read), and that is
//! logged and counted (`vectorflow_release_state_unreadable_total`), never silent.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use vf_rules::{labels_match, served, InFlight, ReleaseStatus, Served};

use crate::fleet::NodeRow;
use crate::pipelines::{version_in, PipelineRow, VersionRow, PIPELINE_COLUMNS};
use crate::releases::{in_flight_row, ReadBy, ReleaseRow, Unreadable};
use crate::{Control, ControlError, Result};

/// One pipeline of the node's environment and what the node gets of it.
#[derive(Debug, Clone)]
pub struct ServedPipeline {
    pub pipeline: PipelineRow,
    pub served: Served,
    /// The version body when `served` carries a version.
    pub version: Option<Arc<VersionRow>>,
}

/// A release's targeted set as parsed from one row version, or why it could not be.
type Targets = std::result::Result<Arc<BTreeSet<String>>, Arc<Unreadable>>;

/// Read-through caches of what a key fixes for ever; see the module's documentation.
#[derive(Debug, Default)]
pub struct DeliveryCache {
    /// Release id -> (row version, targeted set at that version).
    targets: Mutex<HashMap<String, (i64, Targets)>>,
    /// (pipeline id, version) -> the version row.
    versions: Mutex<HashMap<(String, i64), Arc<VersionRow>>>,
}

/// Entries kept per cache before it starts over (releases leave flight; versions pile up).
const CACHE_LIMIT: usize = 4_096;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves a map that is still whole: keep using it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl DeliveryCache {
    fn targets(&self, release_id: &str, row_version: i64) -> Option<Targets> {
        lock(&self.targets)
            .get(release_id)
            .filter(|(v, _)| *v == row_version)
            .map(|(_, t)| t.clone())
    }

    /// The targeted set of `row`, parsed at most once per row version.
    fn targets_of(&self, row: ReleaseRow) -> Targets {
        if let Some(t) = self.targets(&row.id, row.row_version) {
            return t;
        }
        let (id, row_version) = (row.id.clone(), row.row_version);
        let targets = match row.parse() {
            Ok(release) => Ok(Arc::new(release.targeted())),
            Err(e) => Err(Arc::new(e)),
        };
        let mut cache = lock(&self.targets);
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(id, (row_version, targets.clone()));
        targets
    }

    async fn version(
        &self,
        conn: impl sqlx::AnyExecutor<'_>,
        pipeline_id: &str,
        version: i64,
    ) -> Result<Arc<VersionRow>> {
        let key = (pipeline_id.to_string(), version);
        if let Some(v) = lock(&self.versions).get(&key) {
            return Ok(v.clone());
        }
        let row = Arc::new(version_in(conn, pipeline_id, version).await?);
        let mut cache = lock(&self.versions);
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, row.clone());
        Ok(row)
    }
}

/// The fencing inputs of one pipeline, read once and applied to many nodes.
struct Fence {
    /// `(canary version, previous version)` of the in-flight release.
    release: Option<(i64, Option<i64>)>,
    targeted: Arc<BTreeSet<String>>,
}

impl Fence {
    fn none() -> Fence {
        Fence {
            release: None,
            targeted: Arc::default(),
        }
    }

    /// The fence of an in-flight release row.
    fn of(ctl: &Control, row: ReleaseRow) -> Fence {
        let release = Some((row.canary_version, row.previous_version));
        let targeted = match ctl.delivery.targets_of(row) {
            Ok(targeted) => targeted,
            Err(e) => {
                e.report(ctl, ReadBy::Fencing);
                Arc::default()
            }
        };
        Fence { release, targeted }
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

/// A pipeline with the head of its in-flight release, if any.
#[derive(sqlx::FromRow)]
struct PipelineHead {
    #[sqlx(flatten)]
    pipeline: PipelineRow,
    release_id: Option<String>,
    release_canary_version: Option<i64>,
    release_previous_version: Option<i64>,
    release_row_version: Option<i64>,
}

static PIPELINE_HEADS: LazyLock<String> = LazyLock::new(|| {
    let columns = PIPELINE_COLUMNS
        .split(',')
        .map(|c| format!("p.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT {columns}, r.id AS release_id, r.canary_version AS release_canary_version,
            r.previous_version AS release_previous_version, r.row_version AS release_row_version
         FROM pipelines p
         LEFT JOIN releases r ON r.pipeline_id = p.id AND r.status IN ($2, $3)
         WHERE p.environment_id = $1 ORDER BY p.name"
    )
});

/// Every pipeline of the node's environment with the fencing decision for this node, from
/// one consistent view: a release completing or rolling back while the answer is being
/// assembled is seen whole or not at all, so a node never sees its version step back or a
/// pipeline vanish for one poll.
///
/// The pipelines and the heads of their in-flight releases come from one statement. When a
/// release's targets are not cached at that row version, its row is read next; if it has
/// moved on meanwhile, the whole answer is read again inside one snapshot
/// ([`crate::Db::snapshot`]). So the usual poll is one statement, and never inconsistent.
pub async fn served_pipelines(ctl: &Control, node: &NodeRow) -> Result<Vec<ServedPipeline>> {
    let mut conn = ctl.db.read.acquire().await?;
    if let Some(served) = serve(ctl, node, &mut conn).await? {
        return Ok(served);
    }
    drop(conn);
    let mut snapshot = ctl.db.snapshot().await?;
    let served = serve(ctl, node, &mut snapshot).await?.ok_or_else(|| {
        ControlError::Internal(anyhow::anyhow!(
            "a release row changed inside a read snapshot"
        ))
    })?;
    snapshot.commit().await?;
    Ok(served)
}

/// The answer read through `conn`, or `None` when a release row read after the heads
/// statement no longer has the row version that statement saw.
async fn serve(
    ctl: &Control,
    node: &NodeRow,
    conn: &mut sqlx::AnyConnection,
) -> Result<Option<Vec<ServedPipeline>>> {
    let [a, b] = ReleaseStatus::IN_FLIGHT;
    let heads = sqlx::query_as::<_, PipelineHead>(sqlx::AssertSqlSafe(PIPELINE_HEADS.as_str()))
        .bind(&node.environment_id)
        .bind(a.as_str())
        .bind(b.as_str())
        .fetch_all(&mut *conn)
        .await?;
    let mut out = Vec::with_capacity(heads.len());
    for head in heads {
        let fence = match (&head.release_id, head.release_row_version) {
            (Some(id), Some(row_version)) => match ctl.delivery.targets(id, row_version) {
                Some(Ok(targeted)) => Fence {
                    release: head
                        .release_canary_version
                        .map(|c| (c, head.release_previous_version)),
                    targeted,
                },
                // Not parsed at this row version yet, or unreadable (read again so the
                // report names the row as it is now).
                _ => match in_flight_row(&mut *conn, &head.pipeline.id).await? {
                    Some(row) if row.id == *id && row.row_version == row_version => {
                        Fence::of(ctl, row)
                    }
                    _ => return Ok(None),
                },
            },
            _ => Fence::none(),
        };
        let pipeline = head.pipeline;
        let decision = fence.decide(&pipeline, node);
        let version = match decision.version() {
            Some(v) => Some(ctl.delivery.version(&mut *conn, &pipeline.id, v).await?),
            None => None,
        };
        out.push(ServedPipeline {
            pipeline,
            served: decision,
            version,
        });
    }
    Ok(Some(out))
}

/// What each of `nodes` is served of one pipeline.
pub async fn served_nodes(
    ctl: &Control,
    pipeline: &PipelineRow,
    nodes: &[NodeRow],
) -> Result<Vec<Served>> {
    let fence = match in_flight_row(&ctl.db.pool, &pipeline.id).await? {
        Some(row) => Fence::of(ctl, row),
        None => Fence::none(),
    };
    Ok(nodes.iter().map(|n| fence.decide(pipeline, n)).collect())
}
