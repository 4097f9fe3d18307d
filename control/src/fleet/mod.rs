//! The fleet: environments, their enrollment tokens, nodes and node groups.

mod environments;
mod groups;
mod labels;
mod nodes;

pub use environments::*;
pub use groups::*;
pub use labels::{parse_labels, Labels};
pub use nodes::*;
pub use vf_rules::{derive_status, NodeStatus};
