//! The scheduler loop: sleep, tick, repeat; back off after errors; stop on shutdown. The
//! step itself is `vf_control::releases::tick`, which tests call directly.

use std::time::Duration;

use tokio::sync::watch;
use vf_control::{releases, Control};

pub async fn run(ctl: Control, every: Duration, mut stop: watch::Receiver<bool>) {
    tracing::info!(interval_ms = every.as_millis() as u64, "scheduler started");
    let mut delay = every;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
        match releases::tick(&ctl, ctl.now()).await {
            Ok(outcomes) => {
                for o in outcomes {
                    tracing::info!(
                        release_id = o.release_id,
                        decision = o.decision.as_str(),
                        "scheduler decided"
                    );
                }
                delay = every;
            }
            Err(e) => {
                delay = (delay * 2).min(Duration::from_secs(60));
                tracing::error!(
                    error = e.chain(),
                    retry_in_ms = delay.as_millis() as u64,
                    "scheduler tick failed"
                );
            }
        }
    }
    tracing::info!("scheduler stopped");
}
