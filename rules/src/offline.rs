//! Offline and departed nodes in a stage: a targeted node that stopped talking must not stall
//! a release for ever, nor pass it unseen.
//!
//! A plan (and any stage, overriding it) says what an offline node does to a stage:
//! - `offlineNodes`: `exclude` (the default, unless the server's `VF_OFFLINE_NODES_DEFAULT`
//!   says otherwise) leaves it out of proof of apply and the gate inputs, named in the
//!   evidence; `wait` keeps it in every count, so the stage waits for it and proof of apply
//!   names it UNREACHABLE; `fail` fails the stage naming it.
//! - `offlineAfterSeconds`: how long a node may be silent before it is offline (default 3 of
//!   its poll intervals, when the fleet views call it UNREACHABLE).
//! - `maxOfflinePercent` (default 10): with `exclude`, more of the stage's nodes offline than
//!   this holds the stage for an operator instead (a fleet half gone is not a canary).
//!
//! A revoked (or deleted) node has departed: it leaves every count at once under every
//! policy, and is named in the evidence.

use std::collections::BTreeSet;

use crate::gates::{GateResult, Verdict};

/// The pseudo-gate name of the offline result in evidence.
pub const OFFLINE_NODES: &str = "offlineNodes";
/// Offline share of a stage's targeted nodes beyond which `exclude` holds.
pub const DEFAULT_MAX_OFFLINE_PERCENT: f64 = 10.0;
/// Poll intervals of silence after which a node is offline, unless `offlineAfterSeconds`.
pub const DEFAULT_OFFLINE_AFTER_POLLS: i64 = 3;
/// Longest `offlineAfterSeconds`: a day.
pub const MAX_OFFLINE_AFTER_SECONDS: u32 = 86_400;

/// What an offline targeted node does to its stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OfflinePolicy {
    Wait,
    #[default]
    Exclude,
    Fail,
}

impl OfflinePolicy {
    pub const ALL: [OfflinePolicy; 3] = [
        OfflinePolicy::Wait,
        OfflinePolicy::Exclude,
        OfflinePolicy::Fail,
    ];

    /// The plan's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OfflinePolicy::Wait => "wait",
            OfflinePolicy::Exclude => "exclude",
            OfflinePolicy::Fail => "fail",
        }
    }

    pub fn parse(text: &str) -> Option<OfflinePolicy> {
        Self::ALL.into_iter().find(|p| p.as_str() == text)
    }
}

/// The offline fields as a plan or a stage wrote them (each absent unless set).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OfflineSettings {
    pub policy: Option<OfflinePolicy>,
    pub after_seconds: Option<u32>,
    pub max_percent: Option<f64>,
}

impl OfflineSettings {
    /// These settings where set, else `base`'s.
    pub fn over(self, base: OfflineSettings) -> OfflineSettings {
        OfflineSettings {
            policy: self.policy.or(base.policy),
            after_seconds: self.after_seconds.or(base.after_seconds),
            max_percent: self.max_percent.or(base.max_percent),
        }
    }

    /// What a stage applies: these settings, the defaults where unset (`default_policy`: the
    /// server's, normally [`OfflinePolicy::Exclude`]).
    pub fn rule(self, default_policy: OfflinePolicy) -> OfflineRule {
        OfflineRule {
            policy: self.policy.unwrap_or(default_policy),
            after_seconds: self.after_seconds,
            max_percent: self.max_percent.unwrap_or(DEFAULT_MAX_OFFLINE_PERCENT),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == OfflineSettings::default()
    }
}

/// The offline rule of one stage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OfflineRule {
    pub policy: OfflinePolicy,
    /// `None`: [`DEFAULT_OFFLINE_AFTER_POLLS`] of the node's own poll interval.
    pub after_seconds: Option<u32>,
    pub max_percent: f64,
}

impl Default for OfflineRule {
    fn default() -> Self {
        OfflineSettings::default().rule(OfflinePolicy::default())
    }
}

/// When a targeted node was last heard from, as the fleet views see it (contacts not yet
/// written included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContact {
    pub id: String,
    pub name: String,
    pub last_seen_at: Option<i64>,
    pub poll_interval_ms: i64,
    pub revoked: bool,
}

/// What a stage does about its offline nodes: those left out of every count, and the result
/// the evidence shows (none when every targeted node is heard from).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OfflineDecision {
    pub excluded: BTreeSet<String>,
    pub result: Option<GateResult>,
}

/// Nodes named in a reason; the rest are counted.
const NAMED: usize = 5;

/// Applies `rule` at `now` to a stage's `targeted` node ids, given the `contacts` read for
/// them (a targeted id without a contact was deleted: departed).
pub fn decide(
    rule: &OfflineRule,
    targeted: &BTreeSet<String>,
    contacts: &[NodeContact],
    now: i64,
) -> OfflineDecision {
    let mut departed: Vec<String> = Vec::new();
    let mut offline: Vec<&NodeContact> = Vec::new();
    let mut excluded = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for contact in contacts.iter().filter(|c| targeted.contains(&c.id)) {
        seen.insert(contact.id.as_str());
        if contact.revoked {
            departed.push(contact.name.clone());
            excluded.insert(contact.id.clone());
        } else if is_offline(rule, contact, now) {
            offline.push(contact);
        }
    }
    for id in targeted.iter().filter(|id| !seen.contains(id.as_str())) {
        departed.push(id.clone());
        excluded.insert(id.clone());
    }
    offline.sort_by_key(|c| (c.last_seen_at, c.name.clone()));

    let counted = targeted.len() - excluded.len();
    let share = if counted == 0 {
        0.0
    } else {
        offline.len() as f64 * 100.0 / counted as f64
    };
    let named = name_offline(&offline);
    let of = format!("{} of {counted} nodes offline", offline.len());
    let (verdict, reason) = match rule.policy {
        // Waiting adds nothing: proof of apply names the nodes it waits for (UNREACHABLE).
        _ if offline.is_empty() => (Verdict::Pass, String::new()),
        OfflinePolicy::Wait => (Verdict::Pass, String::new()),
        OfflinePolicy::Fail => (Verdict::Fail, format!("{of} (offlineNodes: fail): {named}")),
        // Compare without dividing, so 1 of 10 is exactly 10 %.
        OfflinePolicy::Exclude
            if offline.len() as f64 * 100.0 > rule.max_percent * counted as f64 =>
        {
            (
                Verdict::Inconclusive,
                format!(
                    "{of} ({share:.2}%, at most {}% may be excluded): {named}",
                    rule.max_percent
                ),
            )
        }
        OfflinePolicy::Exclude => {
            excluded.extend(offline.iter().map(|c| c.id.clone()));
            (Verdict::Pass, format!("{of}, excluded: {named}"))
        }
    };
    let mut reason = reason;
    if !departed.is_empty() {
        departed.sort();
        let gone = format!(
            "{} departed (revoked or deleted), excluded: {}",
            departed.len(),
            first_few(&departed)
        );
        reason = if reason.is_empty() {
            gone
        } else {
            format!("{reason}; {gone}")
        };
    }
    if reason.is_empty() {
        return OfflineDecision::default();
    }
    OfflineDecision {
        excluded,
        result: Some(GateResult {
            gate: OFFLINE_NODES.to_owned(),
            verdict,
            observed: Some(share),
            threshold: Some(rule.max_percent),
            query: None,
            reason,
        }),
    }
}

/// Whether `contact` has been silent past the rule's limit (never seen counts as silent).
pub fn is_offline(rule: &OfflineRule, contact: &NodeContact, now: i64) -> bool {
    let limit_ms = match rule.after_seconds {
        Some(seconds) => i64::from(seconds) * 1000,
        None => DEFAULT_OFFLINE_AFTER_POLLS * contact.poll_interval_ms.max(1),
    };
    match contact.last_seen_at {
        None => true,
        Some(seen) => now - seen > limit_ms,
    }
}

/// `edge-7 since 14:02, edge-9 never seen, ...` (UTC), the first few.
fn name_offline(offline: &[&NodeContact]) -> String {
    let names: Vec<String> = offline
        .iter()
        .map(|c| match c.last_seen_at {
            Some(at) => format!("{} since {}", c.name, clock(at)),
            None => format!("{} never seen", c.name),
        })
        .collect();
    first_few(&names)
}

fn first_few(names: &[String]) -> String {
    let mut text = names
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMED {
        text.push_str(", ...");
    }
    text
}

/// `HH:MM` UTC of a time in ms since the epoch.
fn clock(at_ms: i64) -> String {
    let minutes = at_ms.div_euclid(60_000).rem_euclid(24 * 60);
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 14:02 UTC on some day.
    const AT_1402: i64 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 842 * 60_000;
    const NOW: i64 = AT_1402 + 10 * 60_000;

    fn contact(name: &str, last_seen_at: Option<i64>) -> NodeContact {
        NodeContact {
            id: format!("id-{name}"),
            name: name.into(),
            last_seen_at,
            poll_interval_ms: 5_000,
            revoked: false,
        }
    }

    fn fleet(live: usize, offline: &[&str]) -> (BTreeSet<String>, Vec<NodeContact>) {
        let mut contacts: Vec<NodeContact> = (0..live)
            .map(|i| contact(&format!("edge-{i:02}"), Some(NOW - 1_000)))
            .collect();
        contacts.extend(offline.iter().map(|n| contact(n, Some(AT_1402))));
        let targeted = contacts.iter().map(|c| c.id.clone()).collect();
        (targeted, contacts)
    }

    fn rule(policy: OfflinePolicy) -> OfflineRule {
        OfflineRule {
            policy,
            ..OfflineRule::default()
        }
    }

    #[test]
    fn a_fleet_that_is_all_heard_from_adds_nothing_to_the_evidence() {
        let (targeted, contacts) = fleet(5, &[]);
        for policy in OfflinePolicy::ALL {
            let decision = decide(&rule(policy), &targeted, &contacts, NOW);
            assert_eq!(decision, OfflineDecision::default());
        }
    }

    #[test]
    fn exclude_leaves_offline_nodes_out_and_names_them_with_when_they_were_last_seen() {
        let (targeted, contacts) = fleet(38, &["edge-x", "edge-y"]);
        let decision = decide(&OfflineRule::default(), &targeted, &contacts, NOW);
        assert_eq!(
            decision.excluded,
            BTreeSet::from(["id-edge-x".to_string(), "id-edge-y".to_string()])
        );
        let result = decision.result.unwrap();
        assert_eq!(result.verdict, Verdict::Pass);
        assert_eq!(
            result.reason,
            "2 of 40 nodes offline, excluded: edge-x since 14:02, edge-y since 14:02"
        );
        assert_eq!(result.observed, Some(5.0));
    }

    #[test]
    fn exclude_holds_when_more_than_max_offline_percent_are_offline() {
        let (targeted, contacts) = fleet(7, &["a", "b", "c"]);
        let decision = decide(&rule(OfflinePolicy::Exclude), &targeted, &contacts, NOW);
        assert!(decision.excluded.is_empty());
        let result = decision.result.unwrap();
        assert_eq!(result.verdict, Verdict::Inconclusive);
        assert_eq!(
            result.reason,
            "3 of 10 nodes offline (30.00%, at most 10% may be excluded): \
             a since 14:02, b since 14:02, c since 14:02"
        );
        // Exactly at the limit is still excluded.
        let (targeted, contacts) = fleet(9, &["a"]);
        let decision = decide(&rule(OfflinePolicy::Exclude), &targeted, &contacts, NOW);
        assert_eq!(decision.result.unwrap().verdict, Verdict::Pass);
    }

    #[test]
    fn wait_keeps_offline_nodes_in_every_count_and_fail_fails_the_stage() {
        let (targeted, contacts) = fleet(9, &["edge-x"]);
        let waited = decide(&rule(OfflinePolicy::Wait), &targeted, &contacts, NOW);
        assert_eq!(
            waited,
            OfflineDecision::default(),
            "proof of apply names them"
        );
        let failed = decide(&rule(OfflinePolicy::Fail), &targeted, &contacts, NOW);
        assert!(failed.excluded.is_empty());
        let result = failed.result.unwrap();
        assert_eq!(result.verdict, Verdict::Fail);
        assert_eq!(
            result.reason,
            "1 of 10 nodes offline (offlineNodes: fail): edge-x since 14:02"
        );
    }

    #[test]
    fn a_revoked_or_deleted_node_leaves_every_count_under_every_policy() {
        for policy in OfflinePolicy::ALL {
            let (mut targeted, mut contacts) = fleet(3, &[]);
            contacts[0].revoked = true;
            targeted.insert("id-gone".into());
            let decision = decide(&rule(policy), &targeted, &contacts, NOW);
            assert_eq!(
                decision.excluded,
                BTreeSet::from(["id-edge-00".to_string(), "id-gone".to_string()]),
                "{policy:?}"
            );
            let result = decision.result.unwrap();
            assert_eq!(result.verdict, Verdict::Pass);
            assert_eq!(
                result.reason,
                "2 departed (revoked or deleted), excluded: edge-00, id-gone"
            );
        }
    }

    #[test]
    fn a_node_is_offline_after_three_of_its_poll_intervals_or_the_stated_seconds() {
        let recent = contact("edge-1", Some(NOW - 15_000));
        let older = contact("edge-2", Some(NOW - 15_001));
        let default = OfflineRule::default();
        assert!(!is_offline(&default, &recent, NOW));
        assert!(is_offline(&default, &older, NOW));
        assert!(is_offline(&default, &contact("new", None), NOW));
        let patient = OfflineRule {
            after_seconds: Some(600),
            ..default
        };
        assert!(!is_offline(&patient, &older, NOW));
    }

    #[test]
    fn a_stage_setting_wins_over_the_plans_and_defaults_fill_the_rest() {
        let plan = OfflineSettings {
            policy: Some(OfflinePolicy::Wait),
            after_seconds: Some(120),
            max_percent: None,
        };
        let stage = OfflineSettings {
            policy: Some(OfflinePolicy::Fail),
            ..OfflineSettings::default()
        };
        let rule = stage.over(plan).rule(OfflinePolicy::Exclude);
        assert_eq!(rule.policy, OfflinePolicy::Fail);
        assert_eq!(rule.after_seconds, Some(120));
        assert_eq!(rule.max_percent, DEFAULT_MAX_OFFLINE_PERCENT);
        assert_eq!(OfflineRule::default().policy, OfflinePolicy::Exclude);
        let unset = OfflineSettings::default();
        assert_eq!(unset.rule(OfflinePolicy::Wait).policy, OfflinePolicy::Wait);
    }
}
