//! What the edge-config page says, as plain functions: a typed percent field's verdict, the
//! routing preview of a change waiting for confirmation, and one line of the history.

use vf_rolling::{Percent, PercentError};

use crate::types::RollingChange;

/// A percent field's text as a [`Percent`], or the message shown next to the field. Nothing
/// outside 0-100 is ever clamped into range: it is refused.
pub fn percent_input(text: &str) -> Result<Percent, String> {
    text.parse::<Percent>().map_err(|e| match e {
        PercentError::OutOfRange(v) => format!("{v} is out of range: enter 0 to 100"),
        PercentError::NotAWholeNumber(_) => "Enter a whole number from 0 to 100".to_owned(),
    })
}

/// A routing change the operator asked for, shown for confirmation before anything is saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// A new rollout at `percent`.
    Create { rollout: String, percent: Percent },
    /// The global percent of an existing rollout; `overrides` are the orgs that keep theirs.
    Global {
        rollout: String,
        row_version: i64,
        from: u8,
        to: Percent,
        overrides: Vec<(String, u8)>,
    },
    /// An org override set; `from` is its current override, `None` when the org follows the
    /// global percent (`global`) until now.
    SetOrg {
        rollout: String,
        row_version: i64,
        org: String,
        from: Option<u8>,
        global: u8,
        to: Percent,
    },
    /// An org override removed: the org goes from `from` to the global percent.
    RemoveOrg {
        rollout: String,
        row_version: i64,
        org: String,
        from: u8,
        global: u8,
    },
}

impl Pending {
    /// What the change does to routing, one line per fact, for the confirmation panel.
    pub fn preview(&self) -> Vec<String> {
        match self {
            Pending::Create { rollout, percent } => vec![
                format!("{rollout}: new rollout at {percent} of customers"),
                movement(0, percent.get()),
            ],
            Pending::Global {
                rollout,
                from,
                to,
                overrides,
                ..
            } => {
                let mut lines = vec![
                    format!("{rollout}: {from}% -> {to} of customers"),
                    movement(*from, to.get()),
                ];
                if !overrides.is_empty() {
                    let kept: Vec<String> = overrides
                        .iter()
                        .map(|(org, p)| format!("{org} at {p}%"))
                        .collect();
                    lines.push(format!(
                        "Org overrides keep their own percent: {}",
                        kept.join(", ")
                    ));
                }
                lines
            }
            Pending::SetOrg {
                rollout,
                org,
                from,
                global,
                to,
                ..
            } => match from {
                None => vec![
                    format!(
                        "{rollout}: override added for {org}: {global}% (the global percent) -> {to} of its customers"
                    ),
                    movement(*global, to.get()),
                ],
                Some(from) => vec![
                    format!("{rollout}: override for {org}: {from}% -> {to} of its customers"),
                    movement(*from, to.get()),
                ],
            },
            Pending::RemoveOrg {
                rollout,
                org,
                from,
                global,
                ..
            } => vec![
                format!(
                    "{rollout}: override removed for {org}: {from}% -> {global}% (the global percent) of its customers"
                ),
                movement(*from, *global),
            ],
        }
    }
}

/// Which buckets move when a percent goes from `old` to `new` (both 0..=100).
fn movement(old: u8, new: u8) -> String {
    match old.cmp(&new) {
        std::cmp::Ordering::Equal => "Nobody moves".to_owned(),
        std::cmp::Ordering::Less => format!(
            "Buckets {old}..{} switch to the new path",
            new.saturating_sub(1)
        ),
        std::cmp::Ordering::Greater => format!(
            "Buckets {new}..{} go back to the old path",
            old.saturating_sub(1)
        ),
    }
}

/// One history line: "20% -> 50% by alice@example.com: ramp after the load test".
pub fn history_line(h: &RollingChange) -> String {
    let pct = |p: Option<u8>| p.map_or_else(|| "?%".to_owned(), |p| format!("{p}%"));
    let org = h.org.as_deref().unwrap_or("?");
    let what = match h.action.as_str() {
        "rollout.percent" if h.created => format!("created at {}", pct(h.after)),
        "rollout.percent" => format!("{} -> {}", pct(h.before), pct(h.after)),
        "rollout.org.percent" => match h.before {
            None => format!("override for {org} added at {}", pct(h.after)),
            Some(_) => format!("override for {org}: {} -> {}", pct(h.before), pct(h.after)),
        },
        "rollout.org.remove" => format!("override for {org} removed (was {})", pct(h.before)),
        "rollout.delete" => format!("deleted: {} -> 0%", pct(h.before)),
        other => other.to_owned(),
    };
    match &h.comment {
        Some(c) => format!("{what} by {}: {c}", h.actor),
        None => format!("{what} by {}", h.actor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: u8) -> Percent {
        Percent::new(n).unwrap()
    }

    #[test]
    fn a_percent_field_refuses_what_is_not_0_to_100_instead_of_clamping() {
        assert_eq!(percent_input(" 35 "), Ok(p(35)));
        assert_eq!(percent_input("100"), Ok(p(100)));
        assert_eq!(
            percent_input("150"),
            Err("150 is out of range: enter 0 to 100".to_owned())
        );
        assert_eq!(
            percent_input("-1"),
            Err("-1 is out of range: enter 0 to 100".to_owned())
        );
        for text in ["", "12.5", "abc", "50%"] {
            assert_eq!(
                percent_input(text),
                Err("Enter a whole number from 0 to 100".to_owned()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_preview_of_a_global_change_names_the_share_the_buckets_and_the_overrides() {
        let change = Pending::Global {
            rollout: "checkout-v2".into(),
            row_version: 3,
            from: 20,
            to: p(50),
            overrides: vec![("org_big".into(), 5)],
        };
        assert_eq!(
            change.preview(),
            [
                "checkout-v2: 20% -> 50% of customers",
                "Buckets 20..49 switch to the new path",
                "Org overrides keep their own percent: org_big at 5%",
            ]
        );
        let down = Pending::Global {
            rollout: "checkout-v2".into(),
            row_version: 3,
            from: 50,
            to: p(0),
            overrides: vec![],
        };
        assert_eq!(
            down.preview(),
            [
                "checkout-v2: 50% -> 0% of customers",
                "Buckets 0..49 go back to the old path"
            ]
        );
    }

    #[test]
    fn the_preview_of_an_override_says_whether_it_is_added_changed_or_removed() {
        let added = Pending::SetOrg {
            rollout: "r".into(),
            row_version: 1,
            org: "org_big".into(),
            from: None,
            global: 20,
            to: p(5),
        };
        assert_eq!(
            added.preview(),
            [
                "r: override added for org_big: 20% (the global percent) -> 5% of its customers",
                "Buckets 5..19 go back to the old path",
            ]
        );
        let changed = Pending::SetOrg {
            rollout: "r".into(),
            row_version: 1,
            org: "org_big".into(),
            from: Some(5),
            global: 20,
            to: p(5),
        };
        assert_eq!(changed.preview()[1], "Nobody moves");
        let removed = Pending::RemoveOrg {
            rollout: "r".into(),
            row_version: 1,
            org: "org_big".into(),
            from: 5,
            global: 20,
        };
        assert_eq!(
            removed.preview(),
            [
                "r: override removed for org_big: 5% -> 20% (the global percent) of its customers",
                "Buckets 5..19 switch to the new path",
            ]
        );
        let created = Pending::Create {
            rollout: "r".into(),
            percent: p(100),
        };
        assert_eq!(
            created.preview(),
            [
                "r: new rollout at 100% of customers",
                "Buckets 0..99 switch to the new path"
            ]
        );
    }

    fn change(action: &str, before: Option<u8>, after: Option<u8>) -> RollingChange {
        RollingChange {
            at: 0,
            actor: "alice@example.com".into(),
            action: action.into(),
            rollout: "checkout-v2".into(),
            org: None,
            before,
            after,
            created: false,
            comment: None,
        }
    }

    #[test]
    fn a_history_line_reads_as_a_sentence_with_its_comment() {
        let mut h = change("rollout.percent", Some(20), Some(50));
        assert_eq!(history_line(&h), "20% -> 50% by alice@example.com");
        h.comment = Some("load test passed".into());
        assert_eq!(
            history_line(&h),
            "20% -> 50% by alice@example.com: load test passed"
        );
        let created = RollingChange {
            created: true,
            ..change("rollout.percent", Some(0), Some(10))
        };
        assert_eq!(
            history_line(&created),
            "created at 10% by alice@example.com"
        );
    }

    #[test]
    fn override_and_delete_lines_name_the_org_and_the_percents() {
        let org = |action, before, after| RollingChange {
            org: Some("org_big".into()),
            ..change(action, before, after)
        };
        assert_eq!(
            history_line(&org("rollout.org.percent", None, Some(5))),
            "override for org_big added at 5% by alice@example.com"
        );
        assert_eq!(
            history_line(&org("rollout.org.percent", Some(5), Some(10))),
            "override for org_big: 5% -> 10% by alice@example.com"
        );
        assert_eq!(
            history_line(&org("rollout.org.remove", Some(10), None)),
            "override for org_big removed (was 10%) by alice@example.com"
        );
        assert_eq!(
            history_line(&change("rollout.delete", Some(35), Some(0))),
            "deleted: 35% -> 0% by alice@example.com"
        );
    }
}
