//! The server side of the vf-agent protocol: enrollment, node authentication and the config
//! document a node is served.

use std::sync::Arc;

use vf_protocol::{ConfigResponse, EnrollRequest, EnrollResponse, PipelineConfig};

use crate::delivery::{served_for, served_for_node, KnownNode, ServedPipeline, Serving};
use crate::fleet::{
    enroll_node, environment_for_enrollment_token, parse_labels, Credential, NewNode, NodeRow,
    NODE_COLUMNS,
};
use crate::generation::READ_GENERATION;
use crate::ids::{hash_matches, new_token, sha256_hex, token_hash};
use crate::requests::PendingRequest;
use crate::{Control, ControlError, Db, Result};

/// Node kind of agents speaking this protocol.
pub const KIND_VF_AGENT: &str = "vf-agent";

/// An optional short fact an agent reports about itself (os, versions). Control characters
/// are refused: PostgreSQL cannot store NUL, and these are shown in the fleet view.
pub(crate) fn optional_text(
    field: &str,
    value: Option<String>,
    max: usize,
) -> Result<Option<String>> {
    match value {
        Some(v) if v.len() > max => Err(ControlError::invalid(
            field,
            format!("at most {max} characters"),
        )),
        Some(v) if v.chars().any(char::is_control) => {
            Err(ControlError::invalid(field, "no control characters"))
        }
        other => Ok(other),
    }
}

/// Registers a node in the environment the enrollment token belongs to (the token first,
/// then the request's fields, each refused naming it). The node token is returned this
/// once and stored only as a hash.
pub async fn enroll(
    db: &Db,
    req: EnrollRequest,
    poll_interval_ms: i64,
    now: i64,
) -> Result<EnrollResponse> {
    let env = environment_for_enrollment_token(db, &req.token).await?;
    let hostname = req.hostname.trim().to_string();
    if hostname.is_empty() || hostname.len() > 253 || hostname.chars().any(char::is_control) {
        return Err(ControlError::invalid(
            "hostname",
            "1-253 characters, no control characters",
        ));
    }
    let labels = parse_labels("labels", req.labels.unwrap_or_default())?;
    let os = optional_text("os", req.os, 100)?;
    let agent_version = optional_text("agentVersion", req.agent_version, 100)?;
    let vector_version = optional_text("vectorVersion", req.vector_version, 100)?;
    let node_token = new_token("vfn_");
    let node = NewNode {
        kind: KIND_VF_AGENT,
        name: &hostname,
        hostname: &hostname,
        os: os.as_deref(),
        agent_version: agent_version.as_deref(),
        vector_version: vector_version.as_deref(),
        labels: &labels,
        credential: Credential::NodeTokenHash(&token_hash(&node_token)),
        poll_interval_ms,
    };
    let node_id = enroll_node(db, &env, node, now).await?.ok_or_else(|| {
        ControlError::Internal(anyhow::anyhow!("a vf-agent node was not inserted"))
    })?;
    tracing::info!(node_id, hostname, environment = env.name, "node enrolled");
    Ok(EnrollResponse {
        node_id,
        node_token,
        environment_id: env.id,
        environment_name: env.name,
    })
}

/// The live node a node token belongs to, as of the fleet generation now: kept between
/// polls ([`crate::delivery::DeliveryCache`]) while that generation holds, so a revoked
/// token, a changed label or a re-enrolment is seen by the next poll.
pub async fn node_for_token(ctl: &Control, token: &str) -> Result<Arc<KnownNode>> {
    #[derive(sqlx::FromRow)]
    struct WithHash {
        generation: i64,
        token_hash: String,
        #[sqlx(flatten)]
        node: NodeRow,
    }
    let hash = token_hash(token);
    let generation = ctl.db.fleet_generation().await?;
    if let Some(known) = ctl.delivery.node(&hash, generation) {
        return Ok(known);
    }
    // The generation in the same statement: exactly the one the row was read at.
    let row = sqlx::query_as::<_, WithHash>(crate::sql!(
        "SELECT ({READ_GENERATION}) AS generation, token_hash,
            {NODE_COLUMNS} FROM nodes WHERE token_hash = $1 AND revoked_at IS NULL"
    ))
    .bind(&hash)
    .fetch_optional(&ctl.db.read)
    .await?
    .filter(|row| hash_matches(&row.token_hash, token))
    .ok_or(ControlError::Unauthorized)?;
    ctl.db.generation.saw(row.generation);
    let known = Arc::new(KnownNode::new(row.node, row.generation));
    ctl.delivery.remember_node(hash, known.clone());
    Ok(known)
}

/// The config a node is served: what delivery decided per pipeline, the requests waiting for
/// the node, and the ETag of the document that makes. The ETag is a hash of what decides the
/// document (each served pipeline's id, name, version, checksum and log level, the poll
/// interval and the ids of pending sample requests), so it changes exactly when the document
/// does and a 304 is decided without building the document or reading a body.
#[derive(Debug)]
pub struct NodeConfig {
    pub served: Vec<ServedPipeline>,
    /// Sample requests go in the document; the push stream carries every kind.
    pub requests: Vec<PendingRequest>,
    pub poll_interval_ms: i64,
    pub etag: String,
}

/// The secret backend every vf-agent document names.
const SECRET_BACKEND: &str = "BUILTIN";

impl NodeConfig {
    pub fn new(serving: Serving, poll_interval_ms: i64) -> NodeConfig {
        let Serving {
            pipelines: served,
            requests,
        } = serving;
        let decided: Vec<_> = served
            .iter()
            .filter_map(|s| {
                s.version.as_ref().map(|v| {
                    (
                        &s.pipeline.id,
                        &s.pipeline.name,
                        v.version,
                        &v.checksum,
                        &s.pipeline.log_level,
                    )
                })
            })
            .collect();
        let samples: Vec<&str> = requests
            .iter()
            .filter(|r| r.sample().is_some())
            .map(|r| r.id.as_str())
            .collect();
        let key = if samples.is_empty() {
            serde_json::json!([poll_interval_ms, SECRET_BACKEND, decided])
        } else {
            serde_json::json!([poll_interval_ms, SECRET_BACKEND, decided, samples])
        }
        .to_string();
        let etag = format!("\"{}\"", &sha256_hex(key.as_bytes())[..32]);
        NodeConfig {
            served,
            requests,
            poll_interval_ms,
            etag,
        }
    }

    /// Each pipeline's served kind, for metrics.
    pub fn kinds(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.served.iter().map(|s| s.served.kind().as_str())
    }

    /// The document itself (version bodies included).
    pub fn document(&self) -> ConfigResponse {
        let pipelines = self
            .served
            .iter()
            .filter_map(|s| {
                s.version.as_ref().map(|v| PipelineConfig {
                    pipeline_id: s.pipeline.id.clone(),
                    pipeline_name: s.pipeline.name.clone(),
                    version: v.version,
                    config_yaml: v.config_yaml.clone(),
                    checksum: v.checksum.clone(),
                    log_level: s.pipeline.log_level.clone(),
                })
            })
            .collect();
        ConfigResponse {
            pipelines,
            poll_interval_ms: self.poll_interval_ms,
            secret_backend: SECRET_BACKEND.into(),
            push_url: None,
            sample_requests: self.requests.iter().filter_map(|r| r.sample()).collect(),
            pending_action: None,
        }
    }
}

/// The config of a node found by its token.
pub async fn config_for(
    ctl: &Control,
    known: &KnownNode,
    poll_interval_ms: i64,
) -> Result<NodeConfig> {
    Ok(NodeConfig::new(
        served_for(ctl, known).await?,
        poll_interval_ms,
    ))
}

/// The config of a node read by other means (its row just re-read after a heartbeat).
pub async fn config_for_node(
    ctl: &Control,
    node: &NodeRow,
    poll_interval_ms: i64,
) -> Result<NodeConfig> {
    Ok(NodeConfig::new(
        served_for_node(ctl, node).await?,
        poll_interval_ms,
    ))
}
