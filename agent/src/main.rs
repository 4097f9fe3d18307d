//! `vf-agent` command line: flags (each also `VF_AGENT_*`) into `AgentOptions`, then run one
//! agent or a simulated fleet until SIGTERM or ctrl-c.

use std::{collections::BTreeMap, future::Future, path::PathBuf, time::Duration};

use anyhow::Context;
use clap::{error::ErrorKind, CommandFactory, Parser, ValueEnum};
use vf_agent::update::UpdateKey;
use vf_agent::{
    template, Agent, AgentError, AgentOptions, CrashPolicy, Exit, SimSettings, SimulationOptions,
    Simulator,
};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "VectorFlow node agent: enrolls, polls config, runs pipelines"
)]
struct Cli {
    /// Control plane base URL.
    #[arg(long, env = "VF_AGENT_SERVER", value_name = "URL", value_parser = parse_url)]
    server: String,
    /// Environment enrollment token (only needed until the node has enrolled).
    #[arg(
        long,
        env = "VF_AGENT_TOKEN",
        hide_env_values = true,
        default_value = ""
    )]
    token: String,
    /// Holds identity.json and pipelines/*.yaml.
    #[arg(long, env = "VF_AGENT_DATA_DIR", default_value = "./data")]
    data_dir: PathBuf,
    /// Node label, repeatable; with --simulate, values may use {i} and {i%K}.
    #[arg(long = "label", env = "VF_AGENT_LABELS", value_name = "KEY=VALUE",
          value_delimiter = ',', value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// Hostname reported at enrollment (default: this machine's).
    #[arg(long, env = "VF_AGENT_HOSTNAME")]
    hostname: Option<String>,
    /// Do not hold the server's push stream open; changes arrive at the next poll.
    #[arg(long, env = "VF_AGENT_NO_PUSH")]
    no_push: bool,
    /// Command run per pipeline; {config} becomes the pipeline's YAML path.
    #[arg(long, env = "VF_AGENT_COMMAND", value_parser = parse_command,
          conflicts_with = "simulate")]
    command: Option<String>,
    /// Failed exits of a new config version, within --crash-window-secs, after which the agent
    /// goes back to the pipeline's last healthy config (or, with none, stops it as CRASHED).
    #[arg(long, env = "VF_AGENT_CRASH_LIMIT", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..))]
    crash_limit: u32,
    /// How far back --crash-limit counts failed exits, in seconds.
    #[arg(long, env = "VF_AGENT_CRASH_WINDOW_SECS", value_name = "SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    crash_window_secs: u64,
    /// Seconds a pipeline process must stay up for its config to become the last healthy one.
    #[arg(long, env = "VF_AGENT_HEALTHY_AFTER_SECS", value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    healthy_after_secs: u64,
    /// Poll interval override in milliseconds (default: the server's pollIntervalMs).
    #[arg(long, env = "VF_AGENT_POLL_INTERVAL_MS", value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    poll_interval_ms: Option<u64>,
    /// Run N simulated nodes in this process, in <data-dir>/sim-<i>.
    #[arg(long, env = "VF_AGENT_SIMULATE", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    simulate: Option<u64>,
    /// Hostname of simulated node i.
    #[arg(long, env = "VF_AGENT_HOSTNAME_TEMPLATE", default_value = "sim-{i}",
          value_parser = parse_template)]
    hostname_template: String,
    /// Events each simulated pipeline adds per poll.
    #[arg(long, env = "VF_AGENT_SIM_EVENTS_PER_POLL", default_value_t = 100)]
    sim_events_per_poll: u64,
    /// Error fraction of simulated events, unless the config says `# vf-simulate: error_rate=X`.
    #[arg(long, env = "VF_AGENT_SIM_ERROR_RATE", default_value_t = 0.0,
          value_parser = parse_rate)]
    sim_error_rate: f64,
    /// Log output format.
    #[arg(long, env = "VF_AGENT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// ed25519 public key (standard base64 of its 32 bytes) self-updates must be signed
    /// with; without it an update is checked by its sha256 only.
    #[arg(long, env = "VF_UPDATE_PUBLIC_KEY", value_name = "BASE64")]
    update_public_key: Option<UpdateKey>,
    /// PEM root certificate to trust besides the system's, for the server and update
    /// downloads (a private CA).
    #[arg(long, env = "VF_AGENT_CA_FILE", value_name = "PEM")]
    ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn parse_url(raw: &str) -> Result<String, String> {
    if raw.starts_with("http://") || raw.starts_with("https://") {
        Ok(raw.trim_end_matches('/').to_string())
    } else {
        Err("must start with http:// or https://".to_string())
    }
}

fn parse_label(raw: &str) -> Result<(String, String), String> {
    template::parse_label(raw).map_err(|e| e.to_string())
}

fn parse_template(raw: &str) -> Result<String, String> {
    template::render(raw, 0)
        .map(|_| raw.to_string())
        .map_err(|e| e.to_string())
}

fn parse_command(raw: &str) -> Result<String, String> {
    if raw.contains("{config}") {
        Ok(raw.to_string())
    } else {
        Err("must contain {config}, the pipeline's YAML path".to_string())
    }
}

fn parse_rate(raw: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        _ => Err("must be a number between 0 and 1".to_string()),
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn machine_hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Resolves on SIGTERM or ctrl-c.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutdown requested");
}

/// Retries `start` while the server is unreachable or overloaded; a refused token is fatal.
async fn start_with_retry<T, F, Fut>(mut start: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AgentError>>,
{
    let mut attempt = 0;
    loop {
        match start().await {
            Ok(started) => return Ok(started),
            Err(
                error @ (AgentError::Transport(_)
                | AgentError::Overloaded { .. }
                | AgentError::Status { .. }),
            ) => {
                let delay = vf_agent::retry_delay(&error, attempt, rand::random::<f64>());
                tracing::warn!(retry_in = ?delay, "could not enroll: {error}");
                tokio::time::sleep(delay).await;
                attempt = attempt.saturating_add(1);
            }
            Err(error) => return Err(error).context("could not start the agent"),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let labels: BTreeMap<String, String> = cli.labels.into_iter().collect();
    if cli.simulate.is_some() {
        for (key, value) in &labels {
            if let Err(e) = template::render(value, 0) {
                Cli::command()
                    .error(
                        ErrorKind::ValueValidation,
                        format!("--label {key}={value}: {e}"),
                    )
                    .exit();
            }
        }
    }
    let extra_root = match &cli.ca_file {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("--ca-file: reading {}", path.display()))?;
            Some(reqwest::Certificate::from_pem(&pem).with_context(|| {
                format!("--ca-file: {} is not a PEM certificate", path.display())
            })?)
        }
        None => None,
    };
    let options = AgentOptions {
        update_key: cli.update_public_key,
        extra_root,
        deployment_mode: None,
        server_url: cli.server,
        enrollment_token: cli.token,
        data_dir: cli.data_dir,
        hostname: cli.hostname.unwrap_or_else(machine_hostname),
        labels,
        command: cli.command,
        poll_interval_override: cli.poll_interval_ms.map(Duration::from_millis),
        push: !cli.no_push,
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        crash_policy: CrashPolicy {
            limit: cli.crash_limit,
            window: Duration::from_secs(cli.crash_window_secs),
            healthy_after: Duration::from_secs(cli.healthy_after_secs),
            ..CrashPolicy::default()
        },
    };
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    match cli.simulate {
        Some(nodes) => {
            let simulation = SimulationOptions {
                nodes: usize::try_from(nodes).context("--simulate is too large")?,
                hostname_template: cli.hostname_template,
                settings: SimSettings {
                    events_per_poll: cli.sim_events_per_poll,
                    error_rate: cli.sim_error_rate,
                },
            };
            let start = start_with_retry(|| Simulator::start(options.clone(), simulation.clone()));
            let simulator = tokio::select! {
                simulator = start => simulator?,
                () = &mut shutdown => return Ok(()),
            };
            tracing::info!(nodes, "simulated fleet enrolled");
            simulator.run(shutdown).await;
        }
        None => {
            let start = start_with_retry(|| Agent::start(options.clone()));
            let agent = tokio::select! {
                agent = start => agent?,
                () = &mut shutdown => return Ok(()),
            };
            if let Exit::Restart(exe) = agent.run(shutdown).await {
                return Err(restart(&exe));
            }
        }
    }
    Ok(())
}

/// Runs the updated binary in place of this process, with the same arguments and
/// environment; returns only when that fails.
#[cfg(unix)]
fn restart(exe: &std::path::Path) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .exec();
    anyhow::anyhow!("running the updated agent {}: {error}", exe.display())
}

#[cfg(not(unix))]
fn restart(exe: &std::path::Path) -> anyhow::Error {
    anyhow::anyhow!(
        "the agent was updated at {}: start it again to run the new version",
        exe.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(
            ["vf-agent", "--server", "http://localhost:3000"]
                .iter()
                .chain(args),
        )
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn repeated_label_flags_are_all_kept() {
        let cli = parse(&["--label", "a=1", "--label", "zone=z{i%3}"]).unwrap();
        assert_eq!(cli.labels.len(), 2);
    }

    #[test]
    fn malformed_label_error_names_the_flag() {
        let error = parse(&["--label", "oops"]).unwrap_err().to_string();
        assert!(error.contains("--label"), "{error}");
    }

    #[test]
    fn error_rate_outside_zero_to_one_is_refused_naming_the_flag() {
        let error = parse(&["--sim-error-rate", "2"]).unwrap_err().to_string();
        assert!(error.contains("--sim-error-rate"), "{error}");
    }

    #[test]
    fn command_without_config_placeholder_is_refused() {
        let error = parse(&["--command", "vector"]).unwrap_err().to_string();
        assert!(error.contains("--command"), "{error}");
    }

    #[test]
    fn command_and_simulate_cannot_be_combined() {
        assert!(parse(&["--command", "v {config}", "--simulate", "2"]).is_err());
    }

    #[test]
    fn crash_settings_default_to_three_exits_in_sixty_seconds_and_ten_seconds_healthy() {
        let cli = parse(&[]).unwrap();
        assert_eq!(
            (
                cli.crash_limit,
                cli.crash_window_secs,
                cli.healthy_after_secs
            ),
            (3, 60, 10)
        );
        let cli = parse(&["--crash-limit", "5", "--crash-window-secs", "30"]).unwrap();
        assert_eq!((cli.crash_limit, cli.crash_window_secs), (5, 30));
    }

    #[test]
    fn crash_limit_of_zero_is_refused_naming_the_flag() {
        let error = parse(&["--crash-limit", "0"]).unwrap_err().to_string();
        assert!(error.contains("--crash-limit"), "{error}");
    }

    #[test]
    fn server_url_without_scheme_is_refused() {
        let error = Cli::try_parse_from(["vf-agent", "--server", "localhost:3000"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("--server"), "{error}");
    }
}
