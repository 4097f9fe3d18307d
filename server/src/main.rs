//! The server binary: read configuration, start, serve until SIGTERM.

use std::process::ExitCode;

use vf_server::{config::Config, startup, telemetry};

#[tokio::main]
async fn main() -> ExitCode {
    let config = match Config::from_vars(|k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init(config.log_format);
    tracing::info!(?config, "starting VectorFlow");
    let app = match startup::build(config).await {
        Ok(app) => app,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "start-up failed");
            return ExitCode::from(1);
        }
    };
    match app.run_until(startup::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "server failed");
            ExitCode::from(1)
        }
    }
}
