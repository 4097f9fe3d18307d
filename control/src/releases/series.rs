//! Per-stage time series of a release for the history charts: events and errors per minute
//! of the canary nodes (cumulative targets) running the canary version, over each bake.

use std::collections::{BTreeMap, BTreeSet};

use super::state::Release;
use crate::heartbeat::minute_of;
use crate::{Db, Result};

/// One minute of one stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesPoint {
    pub minute: i64,
    pub events_in: i64,
    pub errors: i64,
}

/// The minutes of each started stage, in stage order.
pub async fn stage_series(db: &Db, release: &Release, now: i64) -> Result<Vec<Vec<SeriesPoint>>> {
    db.heartbeats.settled().await;
    let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(
        "SELECT node_id, minute, events_in, errors FROM node_pipeline_metrics
         WHERE pipeline_id = $1 AND version = $2 AND minute >= $3 ORDER BY minute",
    )
    .bind(&release.pipeline_id)
    .bind(release.canary_version)
    .bind(minute_of(release.created_at))
    .fetch_all(&db.pool)
    .await?;
    let stages = &release.state.stages;
    let end_of_release = release.state.completed_at.unwrap_or(now);
    let mut targeted = BTreeSet::new();
    let mut out = Vec::with_capacity(stages.len());
    for (i, stage) in stages.iter().enumerate() {
        targeted.extend(stage.node_ids.iter().cloned());
        let end = stages
            .get(i + 1)
            .map(|s| s.started_at)
            .unwrap_or(end_of_release);
        let (from, to) = (minute_of(stage.started_at), minute_of(end));
        let mut minutes: BTreeMap<i64, SeriesPoint> = BTreeMap::new();
        for (node, minute, events_in, errors) in &rows {
            if *minute < from || *minute > to || !targeted.contains(node) {
                continue;
            }
            let p = minutes.entry(*minute).or_insert(SeriesPoint {
                minute: *minute,
                events_in: 0,
                errors: 0,
            });
            p.events_in = p.events_in.saturating_add(*events_in);
            p.errors = p.errors.saturating_add(*errors);
        }
        out.push(minutes.into_values().collect());
    }
    Ok(out)
}
