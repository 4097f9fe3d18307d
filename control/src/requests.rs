//! What operators ask of one node over the live agent channel: a sample of a pipeline's
//! events, a live tap on one component (start, stop), a pipeline restart.
//!
//! A request is a row (`agent_requests`) holding the push message itself, pending until it
//! expires ([`REQUEST_TTL_MS`]). Inserting it bumps the fleet generation (migration 0011), so
//! - every replica's push watcher sees the generation rise, finds the request in the
//!   environment's delivery view and sends it to the node if its stream is connected there
//!   ([`crate::push`]);
//! - an agent without a push stream finds a pending sample request in its next config
//!   document (`sampleRequests`, [`crate::agent::NodeConfig`]).
//!
//! Answers come back on the agent routes ([`crate::channel`]). Every request is audited:
//! sampled and tapped events are customer data, a restart touches production.

use serde_json::json;
use vf_protocol::PushMessage;

use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::channel::MAX_SAMPLE_EVENTS;
use crate::fleet::{get_node, NodeRow};
use crate::ids::new_id;
use crate::pipelines::get_pipeline;
use crate::{ControlError, Db, Result};

/// How long a request waits for its node. A sample not answered by then is shown as "no
/// answer in 30 s"; a tap or restart not delivered by then is dropped.
pub const REQUEST_TTL_MS: i64 = 30_000;
/// How long an expired request is kept (a tap can be stopped, a sample's answers read).
const KEPT_MS: i64 = 24 * 3600 * 1000;

/// A request waiting for its node.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRequest {
    pub id: String,
    pub node_id: String,
    pub message: PushMessage,
    pub expires_at: i64,
}

impl PendingRequest {
    /// The request as the config document lists it, when it is a sample request.
    pub fn sample(&self) -> Option<vf_protocol::SampleRequest> {
        match &self.message {
            PushMessage::SampleRequest {
                request_id,
                pipeline_id,
                component_keys,
                limit,
            } => Some(vf_protocol::SampleRequest {
                request_id: request_id.clone(),
                pipeline_id: pipeline_id.clone(),
                component_keys: component_keys.clone(),
                limit: *limit,
            }),
            _ => None,
        }
    }
}

/// A node that can be asked something: known, not revoked, running vf-agent (OpAMP agents
/// have no push stream to carry the request).
async fn askable(db: &Db, node_id: &str) -> Result<NodeRow> {
    let node = get_node(db, node_id).await?;
    if node.revoked_at.is_some() {
        return Err(ControlError::Conflict(format!(
            "node {} was revoked; it can no longer be asked anything",
            node.name
        )));
    }
    if node.kind != crate::agent::KIND_VF_AGENT {
        return Err(ControlError::Conflict(format!(
            "node {} is an {} agent; samples, taps and restarts need vf-agent's live channel",
            node.name, node.kind
        )));
    }
    Ok(node)
}

/// A pipeline of the node's environment.
async fn pipeline_of(db: &Db, node: &NodeRow, pipeline_id: &str) -> Result<()> {
    if pipeline_id.trim().is_empty() {
        return Err(ControlError::invalid("pipelineId", "must not be empty"));
    }
    let pipeline = get_pipeline(db, pipeline_id).await?;
    if pipeline.environment_id != node.environment_id {
        return Err(ControlError::invalid(
            "pipelineId",
            "is not a pipeline of the node's environment",
        ));
    }
    Ok(())
}

/// Stores a request and audits it, in one transaction (which bumps the fleet generation).
/// Returns its id: the message's request id when it names one (sample, tap start), else a
/// new one. The pipeline it concerns is the one its message names.
async fn insert(
    db: &Db,
    actor: &Actor,
    node: &NodeRow,
    action: AuditAction,
    message: PushMessage,
    now: i64,
) -> Result<String> {
    let (id, pipeline_id) = match &message {
        PushMessage::SampleRequest {
            request_id,
            pipeline_id,
            ..
        }
        | PushMessage::TapStart {
            request_id,
            pipeline_id,
            ..
        } => (request_id.clone(), Some(pipeline_id.as_str())),
        PushMessage::Action { pipeline_id, .. } => (new_id(), pipeline_id.as_deref()),
        _ => (new_id(), None),
    };
    let mut tx = audit::begin(db).await?;
    // Requests expired a day ago go as new ones come, so the table stays small.
    sqlx::query("DELETE FROM agent_requests WHERE expires_at < $1")
        .bind(now - KEPT_MS)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO agent_requests (id, node_id, environment_id, kind, pipeline_id, message,
            created_by, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&id)
    .bind(&node.id)
    .bind(&node.environment_id)
    .bind(action.as_str())
    .bind(pipeline_id)
    .bind(serde_json::to_string(&message)?)
    .bind(&actor.name)
    .bind(now)
    .bind(now + REQUEST_TTL_MS)
    .execute(&mut *tx)
    .await?;
    let mut details = serde_json::to_value(&message)?;
    details["node"] = json!(node.name);
    tx.commit(
        now,
        AuditEntry {
            actor,
            action,
            target_id: &node.id,
            environment_id: Some(&node.environment_id),
            details,
        },
    )
    .await?;
    Ok(id)
}

/// Asks `node_id` for up to `limit` events of each of `component_keys` of a pipeline.
/// Returns the request id its answers carry ([`crate::channel::sample_results`]).
pub async fn request_sample(
    db: &Db,
    actor: &Actor,
    node_id: &str,
    pipeline_id: &str,
    component_keys: &[String],
    limit: i64,
    now: i64,
) -> Result<String> {
    let node = askable(db, node_id).await?;
    pipeline_of(db, &node, pipeline_id).await?;
    if component_keys.is_empty() {
        return Err(ControlError::invalid(
            "componentKeys",
            "name at least one component",
        ));
    }
    for (i, key) in component_keys.iter().enumerate() {
        if key.trim().is_empty() {
            return Err(ControlError::invalid(
                format!("componentKeys[{i}]"),
                "must not be empty",
            ));
        }
    }
    if !(1..=MAX_SAMPLE_EVENTS as i64).contains(&limit) {
        return Err(ControlError::invalid(
            "limit",
            format!("must be between 1 and {MAX_SAMPLE_EVENTS}"),
        ));
    }
    let message = PushMessage::SampleRequest {
        request_id: new_id(),
        pipeline_id: pipeline_id.to_owned(),
        component_keys: component_keys.to_vec(),
        limit,
    };
    insert(db, actor, &node, AuditAction::NodeSample, message, now).await
}

/// Starts a live tap on one component of a pipeline; its events arrive on the tap-events
/// route under the returned request id until [`stop_tap`].
pub async fn start_tap(
    db: &Db,
    actor: &Actor,
    node_id: &str,
    pipeline_id: &str,
    component_id: &str,
    now: i64,
) -> Result<String> {
    let node = askable(db, node_id).await?;
    pipeline_of(db, &node, pipeline_id).await?;
    if component_id.trim().is_empty() {
        return Err(ControlError::invalid("componentId", "must not be empty"));
    }
    let message = PushMessage::TapStart {
        request_id: new_id(),
        pipeline_id: pipeline_id.to_owned(),
        component_id: component_id.to_owned(),
    };
    insert(db, actor, &node, AuditAction::NodeTapStart, message, now).await
}

/// Stops the tap `request_id` started on `node_id`.
pub async fn stop_tap(
    db: &Db,
    actor: &Actor,
    node_id: &str,
    request_id: &str,
    now: i64,
) -> Result<()> {
    let node = askable(db, node_id).await?;
    let started: Option<(String,)> = sqlx::query_as(
        "SELECT kind FROM agent_requests WHERE id = $1 AND node_id = $2 AND kind = $3",
    )
    .bind(request_id)
    .bind(node_id)
    .bind(AuditAction::NodeTapStart.as_str())
    .fetch_optional(&db.pool)
    .await?;
    if started.is_none() {
        return Err(ControlError::NotFound(format!("tap {request_id}")));
    }
    let message = PushMessage::TapStop {
        request_id: request_id.to_owned(),
    };
    insert(db, actor, &node, AuditAction::NodeTapStop, message, now)
        .await
        .map(drop)
}

/// Has `node_id` restart one pipeline's process.
pub async fn restart(
    db: &Db,
    actor: &Actor,
    node_id: &str,
    pipeline_id: &str,
    now: i64,
) -> Result<String> {
    let node = askable(db, node_id).await?;
    pipeline_of(db, &node, pipeline_id).await?;
    let message = PushMessage::Action {
        action: "restart".into(),
        pipeline_id: Some(pipeline_id.to_owned()),
    };
    insert(db, actor, &node, AuditAction::NodeRestart, message, now).await
}

/// The requests of an environment's nodes that have not expired at `now`, read inside the
/// delivery view's snapshot.
pub(crate) async fn pending_in(
    conn: &mut sqlx::AnyConnection,
    environment_id: &str,
    now: i64,
) -> Result<Vec<PendingRequest>> {
    let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT id, node_id, message, expires_at FROM agent_requests
         WHERE environment_id = $1 AND expires_at > $2 ORDER BY created_at, id",
    )
    .bind(environment_id)
    .bind(now)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, node_id, message, expires_at)| {
            // A message this server cannot read (written by a newer one) is skipped.
            let message = serde_json::from_str(&message).ok()?;
            Some(PendingRequest {
                id,
                node_id,
                message,
                expires_at,
            })
        })
        .collect())
}

/// When a request was made and until when it waits, for the page that shows its answers.
pub async fn request_times(db: &Db, node_id: &str, request_id: &str) -> Result<(i64, i64)> {
    sqlx::query_as(
        "SELECT created_at, expires_at FROM agent_requests WHERE id = $1 AND node_id = $2",
    )
    .bind(request_id)
    .bind(node_id)
    .fetch_optional(&db.read)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("request {request_id}")))
}
