//! The background loops: the scheduler (sleep, tick, repeat; back off after errors; stop on
//! shutdown; the step itself is `vf_control::releases::tick`, which tests call directly),
//! and the writer of polls' last-seen times.

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
        if let Err(e) = vf_control::freeze::announce_freezes(&ctl, ctl.now()).await {
            tracing::warn!(error = e.chain(), "announcing freeze windows failed");
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

/// Writes the polls' last-seen times every `every` until shutdown (the last flush after the
/// HTTP drain is [`flush_once`], called by `run_until`).
pub async fn flush_last_seen(ctl: Control, every: Duration, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
        flush_once(&ctl).await;
    }
}

/// One flush; a failure is logged and the times stay pending for the next one.
pub async fn flush_once(ctl: &Control) {
    if let Err(e) = ctl.db.last_seen.flush(&ctl.db).await {
        tracing::error!(
            error = e.chain(),
            "writing last-seen times failed; will retry"
        );
    }
}
