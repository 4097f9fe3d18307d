//! Checks the audit log's hash chain: `DATABASE_URL=... vf-audit-verify`. Exits 0 when every
//! row verifies, 1 naming the first broken row, 2 when the database cannot be read.

use std::process::ExitCode;

use anyhow::Context;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("vf-audit-verify: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> anyhow::Result<bool> {
    let url = std::env::var("DATABASE_URL").context("DATABASE_URL is not set")?;
    let db = vf_control::Db::connect(&url).await?;
    let report = vf_control::audit::verify(&db)
        .await
        .context("reading the audit log")?;
    Ok(match report.broken {
        None => {
            println!("audit chain OK: {} events", report.events);
            true
        }
        Some(b) => {
            println!("audit chain BROKEN at seq {}: {}", b.seq, b.reason);
            false
        }
    })
}
