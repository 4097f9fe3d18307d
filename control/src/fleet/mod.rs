//! The fleet: environments, their enrollment tokens, nodes and node groups.

mod environments;
mod groups;
mod labels;
mod last_seen;
mod listing;
mod nodes;

pub use environments::*;
pub use groups::*;
pub use labels::{parse_labels, Labels};
pub use last_seen::{LastSeen, FLUSH_EVERY};
pub use listing::{cut, fleet_page, NodeFilter, Page, PageRequest, MAX_PAGE};
pub use nodes::*;
pub use vf_rules::{derive_status, NodeStatus};
