//! The server side of the vf-agent protocol: enrollment, node authentication and the config
//! document a node is served.

use vf_protocol::{ConfigResponse, EnrollRequest, EnrollResponse, PipelineConfig};

use crate::delivery::served_pipelines;
use crate::fleet::{
    enroll_node, environment_for_enrollment_token, parse_labels, Credential, NewNode, NodeRow,
    NODE_COLUMNS,
};
use crate::ids::{hash_matches, new_token, sha256_hex, token_hash};
use crate::{ControlError, Db, Result};

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

/// The live node a node token belongs to.
pub async fn node_for_token(db: &Db, token: &str) -> Result<NodeRow> {
    #[derive(sqlx::FromRow)]
    struct WithHash {
        token_hash: String,
        #[sqlx(flatten)]
        node: NodeRow,
    }
    sqlx::query_as::<_, WithHash>(crate::sql!(
        "SELECT token_hash, {NODE_COLUMNS} FROM nodes WHERE token_hash = $1 AND revoked_at IS NULL"
    ))
    .bind(token_hash(token))
    .fetch_optional(&db.read)
    .await?
    .filter(|row| hash_matches(&row.token_hash, token))
    .map(|row| row.node)
    .ok_or(ControlError::Unauthorized)
}

/// The config document for a node, with its ETag (sha256 of the document, so it changes
/// exactly when what the node is served changes). Also returns each pipeline's served kind
/// for metrics.
pub async fn config_for_node(
    ctl: &crate::Control,
    node: &NodeRow,
    poll_interval_ms: i64,
) -> Result<(ConfigResponse, String, Vec<&'static str>)> {
    let served = served_pipelines(ctl, node).await?;
    let kinds = served.iter().map(|s| s.served.kind().as_str()).collect();
    let pipelines = served
        .into_iter()
        .filter_map(|s| {
            s.version.map(|v| PipelineConfig {
                pipeline_id: s.pipeline.id,
                pipeline_name: s.pipeline.name,
                version: v.version,
                config_yaml: v.config_yaml.clone(),
                checksum: v.checksum.clone(),
                log_level: s.pipeline.log_level,
            })
        })
        .collect();
    let doc = ConfigResponse {
        pipelines,
        poll_interval_ms,
        secret_backend: "BUILTIN".into(),
    };
    let etag = format!(
        "\"{}\"",
        &sha256_hex(serde_json::to_string(&doc)?.as_bytes())[..32]
    );
    Ok((doc, etag, kinds))
}
