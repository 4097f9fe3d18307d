//! vfctl: VectorFlow from a CI job or a shell. Deploys a pipeline config with a rollout plan
//! and follows the release to its end, acts on releases, lists pipelines, and checks plan
//! files offline with the server's own rules. It calls the server functions of docs/api.md
//! with an API token, so it can do exactly what the token's role allows.
//!
//! Exit codes: 0 success (a waited release completed), 1 the waited release rolled back,
//! 2 it is held or paused for an operator, 3 any error (the message names the field or the
//! refusal reason). `--output json` prints the server's answers as JSON.

pub mod api;
pub mod login;
pub mod plan;
pub mod progress;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};

use api::{Api, CliError};
use progress::{Outcome, EXIT_COMPLETE, EXIT_ERROR};

#[derive(Debug, Parser)]
#[command(
    name = "vfctl",
    version,
    about = "VectorFlow from the command line: deploy with a rollout plan, follow and act on releases."
)]
pub struct Cli {
    /// The VectorFlow server, e.g. https://vectorflow.example.com (else the one `vfctl login`
    /// stored).
    #[arg(long, global = true, env = "VF_SERVER")]
    server: Option<String>,
    /// An API token (prefer the VF_API_TOKEN variable: a flag shows in the process list).
    #[arg(long, global = true, env = "VF_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// How results are printed.
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Where `vfctl login` keeps the server and token.
    #[arg(long, global = true, env = "VFCTL_CONFIG", hide = true)]
    config_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Checks an API token against --server and stores both for later commands (0600). The
    /// token comes from VF_API_TOKEN (or --token), else from a prompt.
    Login,
    /// Pipelines.
    Pipelines {
        #[command(subcommand)]
        command: PipelinesCommand,
    },
    /// Starts a progressive release of a new config by a plan; with --wait follows it to
    /// its end (exit 0 complete, 1 rolled back, 2 held or paused for an operator).
    Deploy(DeployArgs),
    /// Releases: follow one, or act on it.
    Release {
        #[command(subcommand)]
        command: ReleaseCommand,
    },
    /// Rollout plans.
    Plan {
        #[command(subcommand)]
        command: PlanCommand,
    },
}

#[derive(Debug, Subcommand)]
enum PipelinesCommand {
    /// Lists the pipelines of every environment the token can see (or of one).
    List {
        /// An environment's name or id.
        #[arg(long)]
        environment: Option<String>,
    },
}

#[derive(Debug, Args)]
struct DeployArgs {
    /// The pipeline's id, or its name (with --environment when several environments have it).
    pipeline: String,
    /// The new config (YAML).
    #[arg(long)]
    config: PathBuf,
    /// The rollout plan (YAML or JSON, docs/rollouts.md).
    #[arg(long)]
    plan: PathBuf,
    /// Why: kept as the version's changelog (unless --changelog) and in the audit log.
    #[arg(long)]
    reason: Option<String>,
    /// The new version's changelog.
    #[arg(long)]
    changelog: Option<String>,
    /// The environment (name or id) to find the pipeline in by name.
    #[arg(long)]
    environment: Option<String>,
    /// Follow the release until it completes, rolls back or waits for an operator.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    follow: FollowArgs,
}

#[derive(Debug, Args)]
struct FollowArgs {
    /// How often --wait reads the release, in milliseconds.
    #[arg(long, default_value_t = 2_000, hide = true)]
    poll_ms: u64,
}

#[derive(Debug, Subcommand)]
enum ReleaseCommand {
    /// Shows a release; with --wait follows it like `deploy --wait`.
    Status {
        release: String,
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Opens the next stage now.
    Advance(ActArgs),
    /// Sends the canary to every remaining node now.
    Complete(ActArgs),
    /// Returns every node to the previous version.
    Rollback(ActArgs),
    /// Stops the bake clock and the scheduler for this release.
    Pause(ActArgs),
    /// Resumes a paused release with the bake time it had left.
    Resume(ActArgs),
}

#[derive(Debug, Args)]
struct ActArgs {
    release: String,
    /// Why, kept with the release and in the audit log.
    #[arg(long)]
    reason: Option<String>,
}

#[derive(Debug, Subcommand)]
enum PlanCommand {
    /// Checks a plan file offline with the server's rules; the first problem names its field.
    Validate { file: PathBuf },
}

/// Where a command writes: results to `out`, progress and errors to `err`; `tty` when `out`
/// is a terminal (progress bars redraw in place).
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    pub tty: bool,
}

/// Runs vfctl with `args` (the first is the program name); returns the exit code.
pub async fn run<I, T>(args: I, io: &mut Io<'_>) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        // Help and version are answers; a usage error is an error (3, never clap's 2,
        // which means "waiting for an operator" here).
        Err(e) if e.use_stderr() => {
            let _ = write!(io.err, "{e}");
            return EXIT_ERROR;
        }
        Err(e) => {
            let _ = write!(io.out, "{e}");
            return EXIT_COMPLETE;
        }
    };
    match execute(cli, io).await {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(io.err, "vfctl: {e}");
            EXIT_ERROR
        }
    }
}

async fn execute(cli: Cli, io: &mut Io<'_>) -> Result<i32, CliError> {
    let output = cli.output;
    match &cli.command {
        Command::Plan {
            command: PlanCommand::Validate { file },
        } => {
            let plan = plan::read(file)?;
            let stages = plan["stages"].as_array().map_or(0, Vec::len);
            match output {
                Output::Json => print_json(io, &json!({"valid": true, "plan": plan})),
                Output::Text => say(io, &format!("{}: valid, {stages} stages", file.display())),
            }
            Ok(EXIT_COMPLETE)
        }
        Command::Login => login(&cli, io).await,
        Command::Pipelines {
            command: PipelinesCommand::List { environment },
        } => {
            let api = connect(&cli)?;
            let rows = pipelines(&api, environment.as_deref()).await?;
            match output {
                Output::Json => print_json(io, &Value::Array(rows)),
                Output::Text => {
                    for p in &rows {
                        let deployed = p["deployed_version"]
                            .as_i64()
                            .map_or("-".to_owned(), |v| format!("v{v}"));
                        say(
                            io,
                            &format!(
                                "{}\t{}\t{}\t{deployed}",
                                p["id"].as_str().unwrap_or(""),
                                p["environment"].as_str().unwrap_or(""),
                                p["name"].as_str().unwrap_or("")
                            ),
                        );
                    }
                }
            }
            Ok(EXIT_COMPLETE)
        }
        Command::Deploy(args) => {
            let plan = plan::read(&args.plan)?;
            let config = std::fs::read_to_string(&args.config)
                .map_err(|e| CliError::Input(format!("{}: {e}", args.config.display())))?;
            let api = connect(&cli)?;
            let pipeline = find_pipeline(&api, &args.pipeline, args.environment.as_deref()).await?;
            let changelog = args
                .changelog
                .clone()
                .or_else(|| args.reason.clone())
                .unwrap_or_else(|| "deployed with vfctl".to_owned());
            let release = api
                .call(
                    "release.canary.create",
                    json!({
                        "pipeline_id": pipeline["id"],
                        "config_yaml": config,
                        "changelog": changelog,
                        "rollout_plan": plan,
                        "reason": args.reason,
                    }),
                )
                .await?;
            if !args.wait {
                report(io, output, &release);
                return Ok(EXIT_COMPLETE);
            }
            let _ = writeln!(
                io.err,
                "release {}: v{} of {}, {} stages",
                release["id"].as_str().unwrap_or("?"),
                release["canary_version"],
                pipeline["name"].as_str().unwrap_or("?"),
                release["stage_count"]
            );
            follow(&api, io, output, release, args.follow.poll_ms).await
        }
        Command::Release { command } => {
            let api = connect(&cli)?;
            let (endpoint, act) = match command {
                ReleaseCommand::Status {
                    release,
                    wait,
                    follow: f,
                } => {
                    let r = api
                        .call("release.canary.get", json!({"release_id": release}))
                        .await?;
                    if *wait {
                        return follow(&api, io, output, r, f.poll_ms).await;
                    }
                    report(io, output, &r);
                    return Ok(EXIT_COMPLETE);
                }
                ReleaseCommand::Advance(a) => ("release.canary.advance", a),
                ReleaseCommand::Complete(a) => ("release.canary.complete", a),
                ReleaseCommand::Rollback(a) => ("release.canary.rollback", a),
                ReleaseCommand::Pause(a) => ("release.canary.pause", a),
                ReleaseCommand::Resume(a) => ("release.canary.resume", a),
            };
            let r = api
                .call(
                    endpoint,
                    json!({"release_id": act.release, "reason": act.reason}),
                )
                .await?;
            report(io, output, &r);
            Ok(EXIT_COMPLETE)
        }
    }
}

fn say(io: &mut Io<'_>, line: &str) {
    let _ = writeln!(io.out, "{line}");
}

fn print_json(io: &mut Io<'_>, value: &Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    say(io, &text);
}

/// A release, as JSON or as its summary and stage lines.
fn report(io: &mut Io<'_>, output: Output, release: &Value) {
    match output {
        Output::Json => print_json(io, release),
        Output::Text => {
            say(
                io,
                &format!(
                    "release {} (v{}): {}",
                    release["id"].as_str().unwrap_or("?"),
                    release["canary_version"],
                    progress::summary_line(release)
                ),
            );
            for line in progress::stage_lines(release, 20) {
                say(io, &format!("  {line}"));
            }
        }
    }
}

/// The server and token: flags and variables first, else what `vfctl login` stored.
fn connect(cli: &Cli) -> Result<Api, CliError> {
    let stored = match credentials_path(cli) {
        Some(path) => login::load(&path)?,
        None => None,
    };
    let server = cli
        .server
        .clone()
        .or_else(|| stored.as_ref().map(|c| c.server.clone()))
        .ok_or_else(|| CliError::Input("no server: pass --server or run vfctl login".into()))?;
    let token = cli
        .token
        .clone()
        .or_else(|| stored.as_ref().map(|c| c.token.clone()))
        .ok_or_else(|| {
            CliError::Input("no API token: set VF_API_TOKEN or run vfctl login".into())
        })?;
    Api::new(&server, &token)
}

fn credentials_path(cli: &Cli) -> Option<PathBuf> {
    cli.config_file.clone().or_else(login::default_path)
}

async fn login(cli: &Cli, io: &mut Io<'_>) -> Result<i32, CliError> {
    let server = cli
        .server
        .clone()
        .ok_or_else(|| CliError::Input("login needs --server (or VF_SERVER)".into()))?;
    let token = match &cli.token {
        Some(token) => token.clone(),
        None => rpassword::prompt_password("API token: ")
            .map_err(|e| CliError::Input(format!("cannot read the token: {e}")))?,
    };
    let token = token.trim().to_owned();
    if token.is_empty() {
        return Err(CliError::Input("the API token is empty".into()));
    }
    let api = Api::new(&server, &token)?;
    // Proves the server and token before storing them.
    let environments = api.call("environment.list", json!({})).await?;
    let path = credentials_path(cli)
        .ok_or_else(|| CliError::Input("no config directory: pass --config-file".into()))?;
    login::store(
        &path,
        &login::Credentials {
            server: api.server().to_owned(),
            token,
        },
    )?;
    let count = environments.as_array().map_or(0, Vec::len);
    match cli.output {
        Output::Json => print_json(
            io,
            &json!({"server": api.server(), "environments": count, "stored": path}),
        ),
        Output::Text => say(
            io,
            &format!(
                "logged in to {} ({count} environments); stored in {}",
                api.server(),
                path.display()
            ),
        ),
    }
    Ok(EXIT_COMPLETE)
}

/// The environments the token can see, optionally only the one named (or with that id).
async fn environments(api: &Api, only: Option<&str>) -> Result<Vec<Value>, CliError> {
    let all = api.call("environment.list", json!({})).await?;
    let all = all.as_array().cloned().unwrap_or_default();
    let Some(only) = only else { return Ok(all) };
    let found: Vec<Value> = all
        .into_iter()
        .filter(|e| e["name"] == only || e["id"] == only)
        .collect();
    if found.is_empty() {
        return Err(CliError::Input(format!(
            "--environment: no environment named {only:?} that this token can see"
        )));
    }
    Ok(found)
}

/// Every pipeline of those environments, each with its environment's name.
async fn pipelines(api: &Api, environment: Option<&str>) -> Result<Vec<Value>, CliError> {
    let mut rows = Vec::new();
    for env in environments(api, environment).await? {
        let list = api
            .call("pipeline.list", json!({"environment_id": env["id"]}))
            .await?;
        for mut p in list.as_array().cloned().unwrap_or_default() {
            p["environment"] = env["name"].clone();
            rows.push(p);
        }
    }
    Ok(rows)
}

/// A pipeline by id, or by name among the environments the token can see.
async fn find_pipeline(
    api: &Api,
    pipeline: &str,
    environment: Option<&str>,
) -> Result<Value, CliError> {
    let rows = pipelines(api, environment).await?;
    if let Some(p) = rows.iter().find(|p| p["id"] == pipeline) {
        return Ok(p.clone());
    }
    let named: Vec<&Value> = rows.iter().filter(|p| p["name"] == pipeline).collect();
    match named.as_slice() {
        [p] => Ok((*p).clone()),
        [] => Err(CliError::Input(format!(
            "pipeline: no pipeline with the id or name {pipeline:?} that this token can see"
        ))),
        several => Err(CliError::Input(format!(
            "pipeline: {pipeline:?} names a pipeline in several environments ({}); pass --environment",
            several
                .iter()
                .map(|p| p["environment"].as_str().unwrap_or("?"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Reads the release every `poll_ms` until it completes, rolls back or waits for an
/// operator, showing its progress on `err`; its final state goes to `out`.
async fn follow(
    api: &Api,
    io: &mut Io<'_>,
    output: Output,
    mut release: Value,
    poll_ms: u64,
) -> Result<i32, CliError> {
    let id = release["id"].as_str().unwrap_or_default().to_owned();
    let mut last_line = String::new();
    let mut drawn = 0;
    loop {
        if io.tty {
            // Redraw the stage bars in place.
            if drawn > 0 {
                let _ = write!(io.err, "\x1b[{drawn}A\x1b[J");
            }
            let lines = progress::stage_lines(&release, 24);
            drawn = lines.len();
            for line in lines {
                let _ = writeln!(io.err, "{line}");
            }
        } else {
            let line = progress::summary_line(&release);
            if line != last_line {
                let _ = writeln!(io.err, "{line}");
                last_line = line;
            }
        }
        let outcome = progress::outcome(&release);
        if let Some(code) = outcome.exit_code() {
            let _ = match &outcome {
                Outcome::Complete => writeln!(
                    io.err,
                    "complete: every node runs v{}",
                    release["canary_version"]
                ),
                Outcome::RolledBack(why) => writeln!(io.err, "rolled back: {why}"),
                Outcome::Waiting(why) => writeln!(io.err, "waiting for an operator: {why}"),
                Outcome::Unreadable(why) => writeln!(io.err, "cannot follow the release: {why}"),
                Outcome::InFlight => Ok(()),
            };
            report(io, output, &release);
            return Ok(code);
        }
        tokio::time::sleep(Duration::from_millis(poll_ms)).await;
        release = api
            .call("release.canary.get", json!({"release_id": id}))
            .await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run_with(args: &[&str]) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let argv = std::iter::once("vfctl").chain(args.iter().copied());
        let code = run(
            argv,
            &mut Io {
                out: &mut out,
                err: &mut err,
                tty: false,
            },
        )
        .await;
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        (code, text(out), text(err))
    }

    #[tokio::test]
    async fn usage_errors_exit_3_naming_the_argument_and_help_exits_0() {
        let (code, _, err) = run_with(&["deploy", "logs", "--config", "c.yaml"]).await;
        assert_eq!(code, 3);
        assert!(err.contains("--plan"), "{err}");
        let (code, out, _) = run_with(&["--help"]).await;
        assert_eq!(code, 0);
        assert!(out.contains("deploy"), "{out}");
    }

    #[tokio::test]
    async fn commands_that_need_a_server_say_how_to_name_one() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("none.json");
        let config = config.to_str().unwrap();
        let (code, _, err) = run_with(&["--config-file", config, "pipelines", "list"]).await;
        assert_eq!(code, 3);
        assert!(err.contains("pass --server or run vfctl login"), "{err}");
        let (code, _, err) = run_with(&[
            "--config-file",
            config,
            "--server",
            "http://127.0.0.1:9",
            "pipelines",
            "list",
        ])
        .await;
        assert_eq!(code, 3);
        assert!(err.contains("VF_API_TOKEN"), "{err}");
    }

    #[tokio::test]
    async fn a_missing_plan_file_is_named() {
        let (code, _, err) = run_with(&["plan", "validate", "/no/such/plan.yaml"]).await;
        assert_eq!(code, 3);
        assert!(err.contains("/no/such/plan.yaml"), "{err}");
    }
}
