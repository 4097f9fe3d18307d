//! One OpAMP round trip: an `AgentToServer` from an authenticated agent in, the
//! `ServerToAgent` answer out. Identity, sequence tracking, status recording and the
//! fenced config offer; the rules are the pure functions of the sibling modules.

use super::config::{build_offer, should_send, AgentConfigState, OfferedPipeline};
use super::identity::{agent_facts, AgentFacts, InstanceUid};
use super::proto::{
    AgentCapabilities, AgentIdentification, AgentToServer, AgentToServerFlags,
    RemoteConfigStatuses, ServerCapabilities, ServerErrorResponse, ServerErrorResponseType,
    ServerToAgent, ServerToAgentFlags,
};
use super::status::{parse_status_name, process_status, status_name, Health};
use super::store::{self, AgentRow, AgentState};
use crate::delivery::served_pipelines;
use crate::fleet::{environment_for_enrollment_token, Environment};
use crate::{Control, ControlError, Db, Result};

/// How often a collector is expected to poll: OpAMP's default HTTP polling interval. A
/// node silent for three of these is UNREACHABLE.
pub const POLL_INTERVAL_MS: i64 = 30_000;

/// What this server does: it accepts status and offers remote config.
pub const SERVER_CAPABILITIES: u64 =
    ServerCapabilities::AcceptsStatus as u64 | ServerCapabilities::OffersRemoteConfig as u64;

/// The answer to one message, and what delivery decided per pipeline (for metrics).
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub reply: ServerToAgent,
    pub served: Vec<&'static str>,
}

impl Exchange {
    fn reply(reply: ServerToAgent) -> Exchange {
        Exchange {
            reply,
            served: Vec::new(),
        }
    }
}

/// The environment whose enrollment token the agent presents (`Authorization: Bearer`).
pub async fn authenticate(db: &Db, token: &str) -> Result<Environment> {
    environment_for_enrollment_token(db, token).await
}

/// A plain acknowledgement: the agent's uid echoed and the server's capabilities.
fn ack(instance_uid: &[u8]) -> ServerToAgent {
    ServerToAgent {
        instance_uid: instance_uid.to_vec(),
        capabilities: SERVER_CAPABILITIES,
        ..ServerToAgent::default()
    }
}

/// The answer to a malformed message. The spec wants every field after `error_response`
/// unset, so only the uid (when there is one) comes with it.
pub fn bad_request(instance_uid: &[u8], message: &str) -> ServerToAgent {
    ServerToAgent {
        instance_uid: instance_uid.to_vec(),
        error_response: Some(ServerErrorResponse {
            r#type: ServerErrorResponseType::BadRequest as i32,
            error_message: message.to_string(),
            details: None,
        }),
        ..ServerToAgent::default()
    }
}

/// Whether the server and agent agree on the agent's state after this message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    InSync,
    /// A message was missed (or the agent is new to us): ask for the full state, and serve
    /// no config until the agent description comes with it.
    NeedsFullState,
}

/// A message carrying the agent description is the full state; otherwise its sequence
/// number must be exactly one more than the last one recorded.
pub fn sequence_sync(last: Option<u64>, sequence_num: u64, has_description: bool) -> Sync {
    if has_description || last.is_some_and(|l| l.wrapping_add(1) == sequence_num) {
        Sync::InSync
    } else {
        Sync::NeedsFullState
    }
}

/// The agent's stored state after `msg`: the sequence number advances only in sync (so a
/// gap keeps asking until the full state arrives); the reported config hash is kept
/// whatever status came with it; health and capabilities when reported.
fn next_state(
    agent: &AgentRow,
    msg: &AgentToServer,
    sync: Sync,
    facts: Option<AgentFacts>,
) -> AgentState {
    let (config_hash, config_status, config_error) = match &msg.remote_config_status {
        Some(rcs) => {
            let status =
                RemoteConfigStatuses::try_from(rcs.status).unwrap_or(RemoteConfigStatuses::Unset);
            let error = rcs.error_message.replace('\0', "");
            (
                Some(hex::encode(&rcs.last_remote_config_hash)),
                Some(status_name(status).to_string()),
                (!error.trim().is_empty()).then(|| error.chars().take(2000).collect()),
            )
        }
        None => (
            agent.opamp_config_hash.clone(),
            agent.opamp_config_status.clone(),
            agent.opamp_config_error.clone(),
        ),
    };
    let (healthy, health_error) = match &msg.health {
        Some(h) => {
            let err = h.last_error.replace('\0', "");
            (
                Some(i64::from(h.healthy)),
                (!err.trim().is_empty()).then(|| err.chars().take(2000).collect()),
            )
        }
        None => (agent.opamp_healthy, agent.opamp_health_error.clone()),
    };
    AgentState {
        facts,
        sequence_num: match sync {
            Sync::InSync => Some(msg.sequence_num as i64),
            Sync::NeedsFullState => agent.opamp_sequence_num,
        },
        capabilities: if msg.capabilities != 0 {
            Some(msg.capabilities as i64)
        } else {
            agent.opamp_capabilities
        },
        config_hash,
        config_status,
        config_error,
        healthy,
        health_error,
    }
}

/// Writes the node's pipeline status rows from its last reported remote-config status and
/// health, for the pipelines of the config it reported. Every message refreshes them, as
/// every vf-agent heartbeat does, so the fleet view counts them as current.
async fn refresh_statuses(
    db: &Db,
    agent: &AgentRow,
    pipelines: &[OfferedPipeline],
    now: i64,
) -> Result<()> {
    let Some(status) = agent.opamp_config_status.as_deref().map(parse_status_name) else {
        return Ok(());
    };
    let health = agent.opamp_healthy.map(|h| Health {
        healthy: h != 0,
        last_error: agent.opamp_health_error.clone().unwrap_or_default(),
    });
    let process = process_status(
        status,
        agent.opamp_config_error.as_deref().unwrap_or(""),
        health.as_ref(),
    );
    let rows: Vec<_> = pipelines
        .iter()
        .map(|p| (p.clone(), process.clone()))
        .collect();
    let applied = status == RemoteConfigStatuses::Applied;
    store::write_statuses(db, &agent.node.id, &rows, applied, now).await
}

/// Handles one message from an agent of `env`.
pub async fn exchange(ctl: &Control, env: &Environment, msg: &AgentToServer) -> Result<Exchange> {
    let db = &ctl.db;
    let now = ctl.now();
    let uid = match InstanceUid::parse(&msg.instance_uid) {
        Ok(uid) => uid,
        Err(e) => {
            return Ok(Exchange::reply(bad_request(
                &msg.instance_uid,
                &e.to_string(),
            )))
        }
    };
    let mut reply = ack(&msg.instance_uid);

    if msg.flags & AgentToServerFlags::RequestInstanceUid as u64 != 0 {
        reply.agent_identification = Some(AgentIdentification {
            new_instance_uid: uuid::Uuid::now_v7().as_bytes().to_vec(),
        });
        return Ok(Exchange::reply(reply));
    }

    let existing = store::find_agent(db, &uid).await?;
    if let Some(agent) = &existing {
        // A uid registered in another environment, or a revoked node: not this token's.
        if agent.node.environment_id != env.id || agent.node.revoked_at.is_some() {
            return Err(ControlError::Unauthorized);
        }
    }
    if msg.agent_disconnect.is_some() {
        if let Some(agent) = existing {
            store::disconnect(db, &agent.node.id, now).await?;
        }
        return Ok(Exchange::reply(reply));
    }

    let facts = msg.agent_description.as_ref().map(|d| agent_facts(d, &uid));
    let agent = match (existing, &facts) {
        (Some(agent), _) => agent,
        (None, Some(f)) => store::register(db, env, &uid, f, POLL_INTERVAL_MS, now).await?,
        (None, None) => {
            reply.flags |= ServerToAgentFlags::ReportFullState as u64;
            return Ok(Exchange::reply(reply));
        }
    };
    let sync = sequence_sync(
        agent.opamp_sequence_num.map(|s| s as u64),
        msg.sequence_num,
        facts.is_some(),
    );
    let state = next_state(&agent, msg, sync, facts);
    store::record(db, &agent.node.id, &state, now).await?;
    // Read back: labels just reported decide selection on this very round trip.
    let agent = store::get_agent(db, &agent.node.id).await?;

    let reported = agent.opamp_config_hash.as_deref();
    let held = match reported {
        Some(h) => store::offered_pipelines(db, &agent.node.id, h).await?,
        None => None,
    };
    let served = served_pipelines(ctl, &agent.node).await?;
    let kinds = served.iter().map(|s| s.served.kind().as_str()).collect();
    let holds_ours = held.as_ref().is_some_and(|p| !p.is_empty());
    let offer = build_offer(&served, holds_ours);

    // What the reported config stands for. When it has the hash of today's offer, today's
    // versions: after a rollback the reverted version has the previous body, so a node
    // that never changed config runs the new version number all the same.
    let current = match (&offer, reported) {
        (Some(o), Some(h)) if o.hash_hex() == h => {
            if held.as_ref() != Some(&o.pipelines) {
                store::remember_offer(db, &agent.node.id, o, now).await?;
            }
            Some(o.pipelines.clone())
        }
        _ => held,
    };
    if let Some(pipelines) = &current {
        refresh_statuses(db, &agent, pipelines, now).await?;
    }

    if sync == Sync::NeedsFullState {
        reply.flags |= ServerToAgentFlags::ReportFullState as u64;
        return Ok(Exchange::reply(reply));
    }
    let capabilities = agent.opamp_capabilities.unwrap_or(0) as u64;
    let accepts = capabilities & AgentCapabilities::AcceptsRemoteConfig as u64 != 0;
    if let (true, Some(offer)) = (accepts, offer) {
        let state = AgentConfigState {
            reported_hash: reported,
            offered_hash: agent.opamp_offered_hash.as_deref(),
            reports_status: capabilities & AgentCapabilities::ReportsRemoteConfig as u64 != 0,
        };
        if should_send(&offer.hash_hex(), state) {
            store::save_offer(db, &agent.node.id, &offer, now).await?;
            reply.remote_config = Some(offer.to_remote_config());
        }
    }
    Ok(Exchange {
        reply,
        served: kinds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_sequence_number_is_in_sync() {
        assert_eq!(sequence_sync(Some(4), 5, false), Sync::InSync);
    }

    #[test]
    fn a_gap_a_repeat_or_an_unknown_last_number_asks_for_the_full_state() {
        assert_eq!(sequence_sync(Some(4), 7, false), Sync::NeedsFullState);
        assert_eq!(sequence_sync(Some(4), 4, false), Sync::NeedsFullState);
        assert_eq!(sequence_sync(None, 0, false), Sync::NeedsFullState);
    }

    #[test]
    fn a_message_with_the_agent_description_is_the_full_state_whatever_its_number() {
        assert_eq!(sequence_sync(Some(4), 90, true), Sync::InSync);
        assert_eq!(sequence_sync(None, 0, true), Sync::InSync);
    }

    #[test]
    fn sequence_numbers_wrap_around() {
        assert_eq!(sequence_sync(Some(u64::MAX), 0, false), Sync::InSync);
    }

    #[test]
    fn a_bad_request_answer_carries_only_the_uid_and_the_error() {
        let r = bad_request(b"uid", "boom");
        assert_eq!(r.instance_uid, b"uid");
        assert_eq!(r.capabilities, 0);
        let e = r.error_response.unwrap();
        assert_eq!(e.r#type, ServerErrorResponseType::BadRequest as i32);
        assert_eq!(e.error_message, "boom");
    }

    #[test]
    fn the_server_accepts_status_and_offers_remote_config() {
        assert_eq!(SERVER_CAPABILITIES, 0b11);
        assert_eq!(ack(b"u").capabilities, SERVER_CAPABILITIES);
    }
}
