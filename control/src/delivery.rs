//! What each node is served: node selection, then the fencing decision of `vf-rules`.
//! Both config paths (vf-agent HTTP and OpAMP) call [`served_pipelines`] (vf-agent's through
//! [`served_for`], with a node found by its token, or [`served_for_node`], which add the
//! requests waiting for the node); the pipeline page calls [`served_nodes`].
//!
//! A node's answer comes from its environment's view: the environment's pipelines with the
//! heads of their in-flight releases, the targeted set of each release and the version
//! bodies each pipeline can serve, all read inside one snapshot together with the fleet
//! generation ([`crate::generation`]). So a release completing or rolling back while an
//! answer is assembled is seen whole or not at all: a node never sees its version step back
//! or a pipeline vanish for one poll.
//!
//! The view is kept ([`DeliveryCache`]) and used for every poll while the fleet generation
//! is the one it was read at; any change to pipelines, releases, nodes or requests bumps the
//! generation, and the next poll reads the view again. No timer, correct across replicas
//! (on PostgreSQL the generation is read on every poll). Deciding a node's membership is a
//! lookup in a set, and a poll neither reads gate evaluations nor parses stage JSON.
//! Longer-lived still: a release's targeted set per row version, and version bodies (both
//! immutable for their key).
//!
//! An in-flight release whose stored state does not parse still fences: every node of its
//! pipeline is served the previous version (the targeted set cannot be read), and that is
//! logged and counted (`vectorflow_release_state_unreadable_total`), never silent.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use vf_rules::{labels_match, served, InFlight, ReleaseStatus, Served};

use crate::fleet::{Labels, NodeRow};
use crate::generation::READ_GENERATION;
use crate::pipelines::{version_in, PipelineRow, VersionRow, PIPELINE_COLUMNS};
use crate::releases::{in_flight_row, ReadBy, ReleaseRow, Unreadable};
use crate::requests::PendingRequest;
use crate::{Control, ControlError, Result};

/// One pipeline of the node's environment and what the node gets of it.
#[derive(Debug, Clone)]
pub struct ServedPipeline {
    pub pipeline: Arc<PipelineRow>,
    pub served: Served,
    /// The version body when `served` carries a version.
    pub version: Option<Arc<VersionRow>>,
}

/// A node found by its token, as of one fleet generation.
#[derive(Debug)]
pub struct KnownNode {
    pub node: NodeRow,
    /// The labels selection uses ([`NodeRow::labels`]), parsed once.
    pub labels: Labels,
    /// The fleet generation the node row was read at.
    pub generation: i64,
}

impl KnownNode {
    pub fn new(node: NodeRow, generation: i64) -> KnownNode {
        KnownNode {
            labels: node.labels(),
            node,
            generation,
        }
    }
}

/// A release's targeted set as parsed from one row version, or why it could not be.
type Targets = std::result::Result<Arc<BTreeSet<String>>, Arc<Unreadable>>;

/// What the config paths keep between polls; see the module's documentation.
#[derive(Debug, Default)]
pub struct DeliveryCache {
    /// Environment id -> its view, at the fleet generation it was read at.
    views: Mutex<HashMap<String, Arc<EnvironmentView>>>,
    /// Node token hash -> the node, at the fleet generation it was read at.
    nodes: Mutex<HashMap<String, Arc<KnownNode>>>,
    /// Release id -> (row version, targeted set at that version).
    targets: Mutex<HashMap<String, (i64, Targets)>>,
    /// (pipeline id, version) -> the version row.
    versions: Mutex<HashMap<(String, i64), Arc<VersionRow>>>,
}

/// Entries kept per cache of releases and versions before it starts over (releases leave
/// flight; versions pile up).
const CACHE_LIMIT: usize = 4_096;

/// Nodes kept by token before that cache starts over (a node is one entry, replaced when
/// the generation moves; revoked tokens are never kept).
const NODE_CACHE_LIMIT: usize = 500_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves a map that is still whole: keep using it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps `value` under `key` unless a newer generation is kept already (two requests reading
/// across a commit must not put the older answer back).
fn remember<T>(
    map: &Mutex<HashMap<String, Arc<T>>>,
    key: String,
    value: Arc<T>,
    generation: impl Fn(&T) -> i64,
    limit: usize,
) {
    let mut map = lock(map);
    if map
        .get(&key)
        .is_some_and(|kept| generation(kept) > generation(&value))
    {
        return;
    }
    if map.len() >= limit {
        map.clear();
    }
    map.insert(key, value);
}

impl DeliveryCache {
    /// The node a token hash names, if it was read at `generation`.
    pub fn node(&self, token_hash: &str, generation: i64) -> Option<Arc<KnownNode>> {
        lock(&self.nodes)
            .get(token_hash)
            .filter(|k| k.generation == generation)
            .cloned()
    }

    /// Keeps a node read by its token hash.
    pub fn remember_node(&self, token_hash: String, node: Arc<KnownNode>) {
        remember(
            &self.nodes,
            token_hash,
            node,
            |k| k.generation,
            NODE_CACHE_LIMIT,
        );
    }

    fn view(&self, environment_id: &str, generation: i64) -> Option<Arc<EnvironmentView>> {
        lock(&self.views)
            .get(environment_id)
            .filter(|v| v.generation == generation)
            .cloned()
    }

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
#[derive(Debug)]
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

    fn decide(
        &self,
        pipeline: &PipelineRow,
        selector: &Labels,
        node_id: &str,
        labels: &Labels,
    ) -> Served {
        let admitted = labels_match(selector, labels);
        let in_flight = self
            .release
            .map(|(canary_version, previous_version)| InFlight {
                canary_version,
                previous_version,
                targeted: &self.targeted,
            });
        served(
            node_id,
            admitted,
            pipeline.deployed_version,
            in_flight.as_ref(),
        )
    }
}

/// One pipeline of an environment's view.
#[derive(Debug)]
struct ViewPipeline {
    pipeline: Arc<PipelineRow>,
    selector: Labels,
    fence: Fence,
    /// The bodies the pipeline can serve: its deployed, canary and previous versions.
    versions: Vec<Arc<VersionRow>>,
}

/// An environment's pipelines, their fences and servable bodies, read in one snapshot at
/// one fleet generation.
#[derive(Debug)]
struct EnvironmentView {
    generation: i64,
    pipelines: Vec<ViewPipeline>,
    /// Requests to its nodes not expired when the view was read ([`crate::requests`]).
    requests: Vec<PendingRequest>,
}

impl EnvironmentView {
    fn serve(&self, node_id: &str, labels: &Labels) -> Vec<ServedPipeline> {
        self.pipelines
            .iter()
            .map(|p| {
                let served = p.fence.decide(&p.pipeline, &p.selector, node_id, labels);
                let version = served
                    .version()
                    .and_then(|v| p.versions.iter().find(|row| row.version == v).cloned());
                ServedPipeline {
                    pipeline: p.pipeline.clone(),
                    served,
                    version,
                }
            })
            .collect()
    }

    /// The requests waiting for `node_id` that have not expired at `now`.
    fn requests_for(&self, node_id: &str, now: i64) -> Vec<PendingRequest> {
        self.requests
            .iter()
            .filter(|r| r.node_id == node_id && r.expires_at > now)
            .cloned()
            .collect()
    }
}

/// What a vf-agent node is served: its pipelines, and the requests waiting for it.
#[derive(Debug)]
pub struct Serving {
    pub pipelines: Vec<ServedPipeline>,
    pub requests: Vec<PendingRequest>,
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

static PIPELINE_HEADS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
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

/// Every pipeline of the node's environment with the fencing decision for this node, as of
/// the fleet generation now.
pub async fn served_pipelines(ctl: &Control, node: &NodeRow) -> Result<Vec<ServedPipeline>> {
    let generation = ctl.db.fleet_generation().await?;
    let view = environment_view(ctl, &node.environment_id, generation).await?;
    Ok(view.serve(&node.id, &node.labels()))
}

/// [`served_pipelines`] and pending requests for a node read by other means (its row just
/// re-read after a heartbeat).
pub async fn served_for_node(ctl: &Control, node: &NodeRow) -> Result<Serving> {
    let generation = ctl.db.fleet_generation().await?;
    let view = environment_view(ctl, &node.environment_id, generation).await?;
    Ok(Serving {
        pipelines: view.serve(&node.id, &node.labels()),
        requests: view.requests_for(&node.id, ctl.now()),
    })
}

/// What a node found by its token is served, at the generation it was found at (so a poll
/// whose node and view are both kept reads nothing on SQLite, and only the generation on
/// PostgreSQL).
pub async fn served_for(ctl: &Control, known: &KnownNode) -> Result<Serving> {
    let view = environment_view(ctl, &known.node.environment_id, known.generation).await?;
    Ok(Serving {
        pipelines: view.serve(&known.node.id, &known.labels),
        requests: view.requests_for(&known.node.id, ctl.now()),
    })
}

/// The environment's view: the kept one when it was read at `generation`, else read now.
async fn environment_view(
    ctl: &Control,
    environment_id: &str,
    generation: i64,
) -> Result<Arc<EnvironmentView>> {
    if let Some(view) = ctl.delivery.view(environment_id, generation) {
        return Ok(view);
    }
    let view = Arc::new(read_view(ctl, environment_id).await?);
    remember(
        &ctl.delivery.views,
        environment_id.to_string(),
        view.clone(),
        |v| v.generation,
        CACHE_LIMIT,
    );
    Ok(view)
}

/// Reads an environment's view inside one snapshot ([`crate::Db::snapshot`]), the fleet
/// generation included, so the view is exactly the database at that generation.
async fn read_view(ctl: &Control, environment_id: &str) -> Result<EnvironmentView> {
    let mut tx = ctl.db.snapshot().await?;
    let generation: i64 = sqlx::query_scalar(READ_GENERATION)
        .fetch_one(&mut *tx)
        .await?;
    let [a, b] = ReleaseStatus::IN_FLIGHT;
    let heads = sqlx::query_as::<_, PipelineHead>(sqlx::AssertSqlSafe(PIPELINE_HEADS.as_str()))
        .bind(environment_id)
        .bind(a.as_str())
        .bind(b.as_str())
        .fetch_all(&mut *tx)
        .await?;
    let mut pipelines = Vec::with_capacity(heads.len());
    for head in heads {
        let pipeline = head.pipeline;
        let fence = match (head.release_id, head.release_row_version) {
            (Some(id), Some(row_version)) => match ctl.delivery.targets(&id, row_version) {
                Some(Ok(targeted)) => Fence {
                    release: head
                        .release_canary_version
                        .map(|canary| (canary, head.release_previous_version)),
                    targeted,
                },
                // Not parsed at this row version yet, or unreadable (parsed again so the
                // report names the row as it is now).
                _ => Fence::of(
                    ctl,
                    in_flight_head(&mut tx, &pipeline.id, &id, row_version).await?,
                ),
            },
            _ => Fence::none(),
        };
        let mut servable: Vec<i64> = [pipeline.deployed_version]
            .into_iter()
            .chain(
                fence
                    .release
                    .map(|(canary, previous)| [Some(canary), previous])
                    .into_iter()
                    .flatten(),
            )
            .flatten()
            .collect();
        servable.sort_unstable();
        servable.dedup();
        let mut versions = Vec::with_capacity(servable.len());
        for v in servable {
            versions.push(ctl.delivery.version(&mut *tx, &pipeline.id, v).await?);
        }
        pipelines.push(ViewPipeline {
            selector: pipeline.node_selector(),
            pipeline: Arc::new(pipeline),
            fence,
            versions,
        });
    }
    let requests = crate::requests::pending_in(&mut tx, environment_id, ctl.now()).await?;
    tx.commit().await?;
    ctl.db.generation.saw(generation);
    Ok(EnvironmentView {
        generation,
        pipelines,
        requests,
    })
}

/// The in-flight release row the heads statement named, read in the same snapshot.
async fn in_flight_head(
    tx: &mut sqlx::AnyConnection,
    pipeline_id: &str,
    release_id: &str,
    row_version: i64,
) -> Result<ReleaseRow> {
    match in_flight_row(&mut *tx, pipeline_id).await? {
        Some(row) if row.id == release_id && row.row_version == row_version => Ok(row),
        _ => Err(ControlError::Internal(anyhow::anyhow!(
            "release {release_id} changed inside a read snapshot"
        ))),
    }
}

/// What each of `nodes` (each its id and the labels selection uses) is served of one
/// pipeline.
pub async fn served_nodes<'a>(
    ctl: &Control,
    pipeline: &PipelineRow,
    nodes: impl IntoIterator<Item = (&'a str, &'a crate::fleet::Labels)>,
) -> Result<Vec<Served>> {
    let fence = match in_flight_row(&ctl.db.pool, &pipeline.id).await? {
        Some(row) => Fence::of(ctl, row),
        None => Fence::none(),
    };
    let selector = pipeline.node_selector();
    Ok(nodes
        .into_iter()
        .map(|(id, labels)| fence.decide(pipeline, &selector, id, labels))
        .collect())
}
