//! The push channel's server side: which agents hold a push stream open here, and what each
//! was last served, so that when what a node is served changes it hears at once
//! (`config_changed`, one message per changed pipeline) instead of at its next poll.
//!
//! Push is a hint only. Delivery is still decided when the agent polls the config route,
//! exactly as without push; a lost or extra message costs a poll, never a wrong config.
//!
//! How a change is noticed: [`watch`] reads the fleet generation ([`crate::generation`])
//! every `every` (a few hundred milliseconds). The database bumps it in the same transaction
//! as every change to what any agent is served, so on PostgreSQL a change committed through
//! one replica is seen by every replica's watcher on its next read, and each tells the agents
//! connected to it. When the generation rose, [`PushHub::check`] recomputes the config of
//! every connected node (answered from the delivery cache where it holds) and compares it
//! with what that node was last told: only nodes whose served config changed get a message.
//!
//! Operators' requests to a node (sample, tap, restart: [`crate::requests`]) travel the same
//! way: storing one bumps the generation, and the check sends each pending request a stream
//! has not carried yet. A stream that opens gets the requests already pending for its node.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;
use vf_protocol::PushMessage;

use crate::agent::{self, NodeConfig};
use crate::requests::PendingRequest;
use crate::{Control, ControlError};

/// What a node is served, per pipeline id: the version and its checksum.
pub type ServedSet = BTreeMap<String, (i64, String)>;

/// How many messages may wait for one slow stream; more are dropped (the agent still polls).
const QUEUE: usize = 64;

/// The pipelines a config serves, as [`changes`] compares them.
pub fn served_set(config: &NodeConfig) -> ServedSet {
    config
        .served
        .iter()
        .filter_map(|s| {
            let v = s.version.as_ref()?;
            Some((s.pipeline.id.clone(), (v.version, v.checksum.clone())))
        })
        .collect()
}

/// One `config_changed` per pipeline whose served version appeared, changed or went away.
pub fn changes(before: &ServedSet, after: &ServedSet) -> Vec<PushMessage> {
    let ids: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    ids.into_iter()
        .filter_map(|id| {
            let reason = match (before.get(id), after.get(id)) {
                (Some(b), Some(a)) if a == b => return None,
                (Some((was, _)), Some((now, _))) if was == now => {
                    format!("v{now} changed (new checksum)")
                }
                (Some((was, _)), Some((now, _))) => format!("now served v{now} (was v{was})"),
                (None, Some((now, _))) => format!("now served v{now}"),
                (Some(_), None) => "no longer served".to_owned(),
                (None, None) => return None,
            };
            Some(PushMessage::ConfigChanged {
                pipeline_id: id.clone(),
                reason,
            })
        })
        .collect()
}

struct Session {
    node_id: String,
    /// The node token the stream was opened with: re-checked on every change, so a revoked
    /// node's stream ends. Kept in memory only, for as long as the stream is open.
    token: String,
    served: ServedSet,
    /// The requests this stream carried (by id), so each goes once.
    asked: HashSet<String>,
    tx: mpsc::Sender<PushMessage>,
}

impl Session {
    /// Queues the requests in `pending` this stream has not carried yet.
    fn ask(&mut self, pending: &[PendingRequest]) {
        for r in pending {
            if self.asked.insert(r.id.clone()) {
                // A full queue: the agent is not reading. A sample request still reaches it
                // in its next config document.
                let _ = self.tx.try_send(r.message.clone());
            }
        }
    }
}

/// The push streams open on this server.
#[derive(Default)]
pub struct PushHub {
    sessions: Mutex<HashMap<u64, Session>>,
    next_id: AtomicU64,
    /// Streams by how they began and ended (the server's `vectorflow_push_connections`):
    /// `opened`; `closed` (the agent went away), `revoked` (its token no longer holds),
    /// `shutdown` (the server stopped).
    pub outcomes: Family<OutcomeLabel, Counter>,
}

/// The `outcome` label of push connections.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

/// An open push stream: its messages, and its place in the hub (given up when dropped).
pub struct Connection {
    pub messages: mpsc::Receiver<PushMessage>,
    hub: Arc<PushHub>,
    id: u64,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Gone already when the hub ended it (revoked, shutdown), which counted it then.
        let removed = self.hub.lock().remove(&self.id).is_some();
        if removed {
            self.hub.count("closed", 1);
        }
    }
}

impl PushHub {
    fn count(&self, outcome: &'static str, n: u64) {
        self.outcomes
            .get_or_create(&OutcomeLabel { outcome })
            .inc_by(n);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Session>> {
        // A panic while holding the lock leaves the map itself intact.
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a stream for `node_id`, which was just served `config`; the requests
    /// pending for it are its first messages.
    pub fn connect(
        self: &Arc<Self>,
        node_id: String,
        token: String,
        config: &NodeConfig,
    ) -> Connection {
        let (tx, messages) = mpsc::channel(QUEUE);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut session = Session {
            node_id,
            token,
            served: served_set(config),
            asked: HashSet::new(),
            tx,
        };
        session.ask(&config.requests);
        self.lock().insert(id, session);
        self.count("opened", 1);
        Connection {
            messages,
            hub: self.clone(),
            id,
        }
    }

    /// How many streams are open.
    pub fn connected(&self) -> usize {
        self.lock().len()
    }

    /// Sends `message` to every stream of `node_id`; false when it has none here.
    pub fn send_to(&self, node_id: &str, message: &PushMessage) -> bool {
        let mut sent = false;
        for s in self.lock().values().filter(|s| s.node_id == node_id) {
            sent |= s.tx.try_send(message.clone()).is_ok();
        }
        sent
    }

    /// Ends every stream (shutdown: the connections close instead of holding it up).
    pub fn close_all(&self) {
        let ended = self.lock().drain().count();
        self.count("shutdown", ended as u64);
    }

    /// Recomputes what each connected node is served and tells those whose config changed.
    /// A node whose token no longer holds (revoked) has its stream ended.
    pub async fn check(&self, ctl: &Control) -> crate::Result<()> {
        let open: Vec<(u64, String)> = self
            .lock()
            .iter()
            .map(|(id, s)| (*id, s.token.clone()))
            .collect();
        for (id, token) in open {
            let config = match agent::node_for_token(ctl, &token).await {
                Ok(known) => agent::config_for(ctl, &known, ctl.settings.poll_interval_ms).await?,
                Err(ControlError::Unauthorized) => {
                    if self.lock().remove(&id).is_some() {
                        self.count("revoked", 1);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut sessions = self.lock();
            let Some(session) = sessions.get_mut(&id) else {
                continue; // closed meanwhile
            };
            let served = served_set(&config);
            for message in changes(&session.served, &served) {
                // A full queue: the agent is not reading; it will poll anyway.
                let _ = session.tx.try_send(message);
            }
            session.served = served;
            session.ask(&config.requests);
        }
        Ok(())
    }
}

/// Tells connected agents about changes until `stop` turns true: reads the fleet generation
/// every `every` and runs [`PushHub::check`] when it rose.
pub async fn watch(ctl: Control, every: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
    let hub = ctl.push.clone();
    let mut seen = ctl.db.fleet_generation().await.unwrap_or(0);
    loop {
        // The sender gone counts as a stop too.
        let gone = tokio::select! {
            _ = tokio::time::sleep(every) => false,
            changed = stop.changed() => changed.is_err(),
        };
        if gone || *stop.borrow() {
            hub.close_all();
            return;
        }
        if hub.connected() == 0 {
            // Nobody to tell, so no read. The first check after a stream opens may then find
            // the generation risen for an old change: harmless, as a stream registers what
            // its node is served when it opens, so that check finds nothing changed.
            continue;
        }
        match ctl.db.fleet_generation().await {
            Ok(generation) if generation > seen => {
                seen = generation;
                if let Err(e) = hub.check(&ctl).await {
                    tracing::warn!(error = %e, "push: checking connected nodes failed");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "push: reading the fleet generation failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[(&str, i64, &str)]) -> ServedSet {
        items
            .iter()
            .map(|(id, v, sum)| (id.to_string(), (*v, sum.to_string())))
            .collect()
    }

    fn reasons(messages: Vec<PushMessage>) -> Vec<(String, String)> {
        messages
            .into_iter()
            .map(|m| match m {
                PushMessage::ConfigChanged {
                    pipeline_id,
                    reason,
                } => (pipeline_id, reason),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[test]
    fn only_pipelines_whose_served_version_changed_are_named() {
        let before = set(&[("a", 3, "x"), ("b", 1, "y"), ("c", 2, "z")]);
        let after = set(&[("a", 2, "w"), ("b", 1, "y"), ("d", 1, "q")]);
        assert_eq!(
            reasons(changes(&before, &after)),
            vec![
                ("a".into(), "now served v2 (was v3)".into()),
                ("c".into(), "no longer served".into()),
                ("d".into(), "now served v1".into()),
            ]
        );
    }

    #[test]
    fn nothing_changed_means_no_message() {
        let same = set(&[("a", 3, "x")]);
        assert!(changes(&same, &same).is_empty());
        assert!(changes(&ServedSet::new(), &ServedSet::new()).is_empty());
    }

    #[test]
    fn a_new_checksum_under_the_same_version_is_a_change() {
        let before = set(&[("a", 3, "x")]);
        let after = set(&[("a", 3, "y")]);
        assert_eq!(
            reasons(changes(&before, &after)),
            vec![("a".into(), "v3 changed (new checksum)".into())]
        );
    }

    fn config(requests: Vec<PendingRequest>) -> NodeConfig {
        let serving = crate::delivery::Serving {
            pipelines: vec![],
            requests,
        };
        NodeConfig::new(serving, 1000)
    }

    fn restart(id: &str) -> PendingRequest {
        PendingRequest {
            id: id.into(),
            node_id: "n1".into(),
            message: PushMessage::Action {
                action: "restart".into(),
                pipeline_id: Some(format!("p-{id}")),
            },
            expires_at: i64::MAX,
        }
    }

    #[tokio::test]
    async fn pending_requests_open_the_stream_and_each_goes_once() {
        let hub = Arc::new(PushHub::default());
        let mut a = hub.connect("n1".into(), "t1".into(), &config(vec![restart("r1")]));
        assert_eq!(a.messages.recv().await, Some(restart("r1").message));
        {
            let mut sessions = hub.lock();
            let session = sessions.values_mut().next().expect("one session");
            session.ask(&[restart("r1"), restart("r2")]);
            session.ask(&[restart("r2")]);
        }
        assert_eq!(a.messages.recv().await, Some(restart("r2").message));
        assert!(a.messages.try_recv().is_err(), "r1 and r2 went once each");
    }

    #[tokio::test]
    async fn a_dropped_connection_leaves_the_hub_and_messages_reach_open_ones() {
        let hub = Arc::new(PushHub::default());
        let mut a = hub.connect("n1".into(), "t1".into(), &config(vec![]));
        let b = hub.connect("n2".into(), "t2".into(), &config(vec![]));
        assert_eq!(hub.connected(), 2);
        let hello = PushMessage::PollInterval { interval_ms: 1000 };
        assert!(hub.send_to("n1", &hello));
        assert_eq!(a.messages.recv().await, Some(hello.clone()));
        drop(b);
        assert_eq!(hub.connected(), 1);
        assert!(!hub.send_to("n2", &hello));
        hub.close_all();
        assert_eq!(a.messages.recv().await, None, "the stream ends");
    }
}
