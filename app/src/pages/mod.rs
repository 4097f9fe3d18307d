//! One module per page.

pub mod account;
pub mod audit;
pub mod edge_config;
pub mod environments;
pub mod fleet;
pub mod groups;
pub mod node;
pub mod pipeline;
pub mod pipelines;
pub mod signin;
pub mod users;
pub mod webhooks;
