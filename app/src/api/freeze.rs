//! Server functions of an environment's holds: what holds it now (the banner), stopping and
//! lifting its line, and its freeze windows. Reading is for anyone who sees the
//! environment; changing is for its admins.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What holds an environment now: the banner on every page of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HoldView {
    pub environment_id: String,
    pub environment: String,
    pub line_stopped: Option<LineStopView>,
    pub freeze: Option<FreezeNowView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineStopView {
    pub at: i64,
    pub by: String,
    pub reason: Option<String>,
}

/// The open freeze: its window, the window's reason, and when the freeze ends (unix ms, and
/// in the window's wall-clock words).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreezeNowView {
    pub window: String,
    pub reason: Option<String>,
    pub until: i64,
    pub until_text: String,
}

/// A stored freeze window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreezeWindowView {
    pub id: String,
    pub window: String,
    pub reason: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    /// Open now.
    pub open: bool,
}

/// What stopping or lifting the line did: the hold now, and the releases paused or resumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineChangeView {
    pub hold: HoldView,
    pub releases: Vec<String>,
}

#[cfg(feature = "ssr")]
fn hold_view(h: vf_control::freeze::EnvironmentHold) -> HoldView {
    HoldView {
        environment_id: h.environment_id,
        environment: h.environment,
        line_stopped: h.hold.line.map(|l| LineStopView {
            at: l.at,
            by: l.by,
            reason: l.reason,
        }),
        freeze: h.hold.freeze.map(|f| FreezeNowView {
            window: f.window,
            reason: f.reason,
            until: f.until,
            until_text: f.until_text,
        }),
    }
}

/// What holds the environment now: a stopped line, an open freeze.
#[server(endpoint = "environment.hold", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn environment_hold(environment_id: String) -> Result<HoldView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Environment(&environment_id)).await?;
    let hold = vf_control::freeze::hold_of(&ctl.db, &environment_id, ctl.now())
        .await
        .map_err(fail)?;
    Ok(hold_view(hold))
}

/// Stops the line: every in-flight release of the environment pauses, and new releases
/// and direct deploys are refused with `reason` until the line is lifted.
#[server(endpoint = "environment.line.stop", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn stop_line(
    environment_id: String,
    #[server(default)] reason: Option<String>,
) -> Result<LineChangeView, ServerFnError> {
    line_change(environment_id, reason, true).await
}

/// Lifts the line: changes are allowed again, and the releases the stop paused resume.
#[server(endpoint = "environment.line.lift", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn lift_line(
    environment_id: String,
    #[server(default)] reason: Option<String>,
) -> Result<LineChangeView, ServerFnError> {
    line_change(environment_id, reason, false).await
}

/// Stops (`stop`) or lifts the line, as an admin of the environment; answers the hold now.
#[cfg(feature = "ssr")]
async fn line_change(
    environment_id: String,
    reason: Option<String>,
    stop: bool,
) -> Result<LineChangeView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    use vf_control::freeze::{lift_line, stop_line};
    let (ctl, g) = authorize(Role::Admin, Target::Environment(&environment_id)).await?;
    let done = if stop {
        stop_line(&ctl, &g.actor, &environment_id, reason).await
    } else {
        lift_line(&ctl, &g.actor, &environment_id, reason).await
    }
    .map_err(fail)?;
    let hold = vf_control::freeze::hold_of(&ctl.db, &environment_id, ctl.now())
        .await
        .map_err(fail)?;
    Ok(LineChangeView {
        hold: hold_view(hold),
        releases: done.releases,
    })
}

/// The environment's freeze windows, oldest first.
#[server(endpoint = "freeze.list", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_freeze_windows(
    environment_id: String,
) -> Result<Vec<FreezeWindowView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Environment(&environment_id)).await?;
    let rows = vf_control::freeze::list_freeze_windows(&ctl.db, &environment_id)
        .await
        .map_err(fail)?;
    let now = ctl.now();
    Ok(rows.into_iter().map(|row| window_view(row, now)).collect())
}

#[cfg(feature = "ssr")]
fn window_view(row: vf_control::freeze::FreezeWindowRow, now: i64) -> FreezeWindowView {
    FreezeWindowView {
        open: vf_rules::freeze::FreezeWindow::parse(&row.spec)
            .is_ok_and(|w| w.open_until(now).is_some()),
        id: row.id,
        window: row.spec,
        reason: row.reason,
        created_by: row.created_by,
        created_at: row.created_at,
    }
}

/// Adds a freeze window: `window` is "Fri 16:00 - Mon 08:00 Europe/Berlin" (weekly),
/// "2026-12-24 00:00 - 2026-12-27 08:00 Europe/Berlin" or "2026-12-24 - 2026-12-27 UTC"
/// (once); `reason` shows in the banner and in refusals.
#[server(endpoint = "freeze.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn create_freeze_window(
    environment_id: String,
    window: String,
    #[server(default)] reason: Option<String>,
) -> Result<FreezeWindowView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Environment(&environment_id)).await?;
    let now = ctl.now();
    let row = vf_control::freeze::create_freeze_window(
        &ctl.db,
        &g.actor,
        &environment_id,
        &window,
        reason,
        now,
    )
    .await
    .map_err(fail)?;
    Ok(window_view(row, now))
}

/// Deletes a freeze window.
#[server(endpoint = "freeze.delete", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn delete_freeze_window(id: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Viewer, Target::Any).await?;
    let environment_id = vf_control::freeze::freeze_window_environment(&ctl.db, &id)
        .await
        .map_err(fail)?;
    let (ctl, g) = authorize(Role::Admin, Target::Environment(&environment_id)).await?;
    vf_control::freeze::delete_freeze_window(&ctl.db, &g.actor, &id, ctl.now())
        .await
        .map_err(fail)
}
