//! `--simulate N`: N independent agents in one process (own data dir, hostname and labels
//! each), polling concurrently, so a laptop can play a fleet for rollout tests.

use std::{future::Future, path::PathBuf};

use futures::future::{join_all, try_join_all};
use tokio::{sync::watch, task::JoinSet};

use crate::{
    agent::{Agent, PollOutcome},
    error::Result,
    options::AgentOptions,
    sim_counters::SimSettings,
    template,
};

/// Shape of a simulated fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulationOptions {
    pub nodes: usize,
    /// Hostname per node, e.g. `sim-{i}`.
    pub hostname_template: String,
    pub settings: SimSettings,
}

impl Default for SimulationOptions {
    fn default() -> Self {
        SimulationOptions {
            nodes: 1,
            hostname_template: "sim-{i}".to_string(),
            settings: SimSettings::default(),
        }
    }
}

/// The simulated nodes; node `i` lives in `<data_dir>/sim-<i>`.
#[derive(Debug)]
pub struct Simulator {
    agents: Vec<Agent>,
}

impl Simulator {
    /// Renders each node's options from `base` (label values are templates) and starts them
    /// all, enrolling concurrently.
    pub async fn start(base: AgentOptions, simulation: SimulationOptions) -> Result<Simulator> {
        let options = (0..simulation.nodes)
            .map(|i| node_options(&base, &simulation.hostname_template, i))
            .collect::<Result<Vec<_>>>()?;
        let settings = simulation.settings;
        let agents = try_join_all(
            options
                .into_iter()
                .map(|options| Agent::start_simulated(options, settings)),
        )
        .await?;
        Ok(Simulator { agents })
    }

    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    /// One poll of every node, concurrently; results in node order.
    pub async fn poll_all_once(&mut self) -> Vec<Result<PollOutcome>> {
        join_all(self.agents.iter_mut().map(Agent::poll_once)).await
    }

    /// Runs every node's poll loop until `shutdown` resolves.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut loops = JoinSet::new();
        for agent in self.agents {
            let mut stop = stop_rx.clone();
            loops.spawn(agent.run(async move {
                let _ = stop.wait_for(|stop| *stop).await;
            }));
        }
        shutdown.await;
        let _ = stop_tx.send(true);
        while loops.join_next().await.is_some() {}
    }
}

fn node_options(
    base: &AgentOptions,
    hostname_template: &str,
    index: usize,
) -> Result<AgentOptions> {
    Ok(AgentOptions {
        data_dir: sim_data_dir(base, index),
        hostname: template::render(hostname_template, index)?,
        labels: template::render_labels(&base.labels, index)?,
        command: None,
        ..base.clone()
    })
}

fn sim_data_dir(base: &AgentOptions, index: usize) -> PathBuf {
    base.data_dir.join(format!("sim-{index}"))
}
