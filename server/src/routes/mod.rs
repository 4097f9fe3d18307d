//! HTTP routes other than the web app's pages and server functions.

pub mod agent;
pub mod edge;
pub mod health;
pub mod opamp;
