//! One page of an environment's nodes: filtered by name, label and status, counted, and cut
//! to a page, so no view ever ships the whole fleet.

use vf_rules::NodeStatus;

use super::labels::Labels;
use super::nodes::{fleet, NodeView};
use crate::{ControlError, Db, Result};

/// The most nodes one page may hold.
pub const MAX_PAGE: usize = 500;

/// Which nodes a view lists: every criterion given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFilter {
    /// Part of the node's name, in any case.
    pub name: Option<String>,
    /// `key=value`, or `key` alone for any value.
    pub label: Option<(String, Option<String>)>,
    pub status: Option<NodeStatus>,
}

impl NodeFilter {
    /// Reads the filter fields; blank ones are left out. `label` is `key=value` or `key`.
    pub fn parse(
        name: Option<&str>,
        label: Option<&str>,
        status: Option<NodeStatus>,
    ) -> Result<NodeFilter> {
        let label = match blank_to_none(label) {
            None => None,
            Some(l) => match l.split_once('=') {
                Some((k, _)) if k.trim().is_empty() => {
                    return Err(ControlError::invalid(
                        "label",
                        "expected key=value or key, with a key before the =",
                    ))
                }
                Some((k, v)) => Some((k.trim().to_string(), Some(v.trim().to_string()))),
                None => Some((l.to_string(), None)),
            },
        };
        Ok(NodeFilter {
            name: blank_to_none(name).map(str::to_lowercase),
            label,
            status,
        })
    }

    /// Whether a node with this name, labels and status is listed.
    pub fn matches(&self, name: &str, labels: &Labels, status: NodeStatus) -> bool {
        let name_ok = self
            .name
            .as_ref()
            .is_none_or(|part| name.to_lowercase().contains(part.as_str()));
        let label_ok = self.label.as_ref().is_none_or(|(k, v)| match v {
            Some(v) => labels.get(k) == Some(v),
            None => labels.contains_key(k),
        });
        name_ok && label_ok && self.status.is_none_or(|s| s == status)
    }
}

fn blank_to_none(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

/// Where a page starts and how long it is, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub offset: usize,
    pub limit: usize,
}

impl PageRequest {
    pub const DEFAULT_LIMIT: usize = 50;

    pub fn parse(offset: Option<i64>, limit: Option<i64>) -> Result<PageRequest> {
        let offset = offset.unwrap_or(0);
        if offset < 0 {
            return Err(ControlError::invalid("offset", "cannot be negative"));
        }
        let limit = limit.unwrap_or(Self::DEFAULT_LIMIT as i64);
        if !(1..=MAX_PAGE as i64).contains(&limit) {
            return Err(ControlError::invalid(
                "limit",
                format!("between 1 and {MAX_PAGE}"),
            ));
        }
        Ok(PageRequest {
            offset: offset as usize,
            limit: limit as usize,
        })
    }
}

/// A page of nodes with the counts around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// Every node considered (the environment's live nodes, or a pipeline's).
    pub total: usize,
    /// Of those, how many are in each status, in the order of [`NodeStatus::ALL`]; none left out.
    pub by_status: Vec<(NodeStatus, usize)>,
    /// Nodes the filter admits.
    pub matched: usize,
    /// The page of those, in the order given.
    pub rows: Vec<T>,
}

/// One page of the environment's nodes as the fleet view shows them, by name.
pub async fn fleet_page(
    db: &Db,
    environment_id: &str,
    now: i64,
    filter: &NodeFilter,
    page: PageRequest,
) -> Result<Page<NodeView>> {
    let all = fleet(db, environment_id, now).await?;
    Ok(cut(all, filter, page, |n| {
        (n.node.name.as_str(), &n.labels, n.status)
    }))
}

/// Counts `rows` and keeps the page of those `filter` admits; `key` gives a row's name,
/// labels and status.
pub fn cut<T>(
    rows: Vec<T>,
    filter: &NodeFilter,
    page: PageRequest,
    key: impl Fn(&T) -> (&str, &Labels, NodeStatus),
) -> Page<T> {
    let total = rows.len();
    let by_status = NodeStatus::tally(rows.iter().map(|r| key(r).2));
    let mut matched = 0;
    let mut kept = Vec::with_capacity(page.limit.min(total));
    for row in rows {
        let (name, labels, status) = key(&row);
        if !filter.matches(name, labels, status) {
            continue;
        }
        if matched >= page.offset && kept.len() < page.limit {
            kept.push(row);
        }
        matched += 1;
    }
    Page {
        total,
        by_status,
        matched,
        rows: kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    struct N(&'static str, Labels, NodeStatus);

    fn fleet() -> Vec<N> {
        use NodeStatus::*;
        vec![
            N("edge-1", labels(&[("zone", "a")]), Healthy),
            N("edge-2", labels(&[("zone", "b")]), Unreachable),
            N("EDGE-3", labels(&[("zone", "a"), ("gpu", "")]), Healthy),
            N("core-1", labels(&[]), Degraded),
        ]
    }

    fn names(filter: &NodeFilter, offset: usize, limit: usize) -> (usize, Vec<&'static str>) {
        let page = cut(fleet(), filter, PageRequest { offset, limit }, |n| {
            (n.0, &n.1, n.2)
        });
        (page.matched, page.rows.iter().map(|n| n.0).collect())
    }

    #[test]
    fn name_label_and_status_must_all_hold() {
        let f = NodeFilter::parse(Some(" Edge "), Some("zone=a"), Some(NodeStatus::Healthy));
        assert_eq!(names(&f.unwrap(), 0, 10), (2, vec!["edge-1", "EDGE-3"]));
        let f = NodeFilter::parse(None, Some("gpu"), None).unwrap();
        assert_eq!(names(&f, 0, 10), (1, vec!["EDGE-3"]));
        let f = NodeFilter::parse(Some(""), Some("  "), Some(NodeStatus::Degraded)).unwrap();
        assert_eq!(names(&f, 0, 10), (1, vec!["core-1"]));
    }

    #[test]
    fn a_page_is_cut_from_the_matches_and_counts_see_everything() {
        let page = cut(
            fleet(),
            &NodeFilter::parse(Some("edge"), None, None).unwrap(),
            PageRequest {
                offset: 1,
                limit: 1,
            },
            |n| (n.0, &n.1, n.2),
        );
        assert_eq!(page.total, 4);
        assert_eq!(page.matched, 3);
        assert_eq!(
            page.rows.iter().map(|n| n.0).collect::<Vec<_>>(),
            ["edge-2"]
        );
        assert_eq!(
            page.by_status,
            vec![
                (NodeStatus::Healthy, 2),
                (NodeStatus::Degraded, 1),
                (NodeStatus::Unreachable, 1),
                (NodeStatus::Unknown, 0)
            ]
        );
    }

    #[test]
    fn bad_filters_and_pages_name_their_field() {
        let e = NodeFilter::parse(None, Some("=a"), None).unwrap_err();
        assert!(e.to_string().starts_with("label:"), "{e}");
        let e = PageRequest::parse(Some(-1), None).unwrap_err();
        assert!(e.to_string().starts_with("offset:"), "{e}");
        let e = PageRequest::parse(None, Some(501)).unwrap_err();
        assert!(e.to_string().starts_with("limit:"), "{e}");
        assert_eq!(
            PageRequest::parse(None, None).unwrap(),
            PageRequest {
                offset: 0,
                limit: 50
            }
        );
    }
}
