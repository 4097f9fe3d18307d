//! Server functions of the live agent channel: ask a node for a sample of a pipeline's
//! events, tap one component live, restart a pipeline; and read what came back. Sampled and
//! tapped events are customer data, so every one of these needs the editor role.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use crate::types::SampleResultView;
use crate::types::{SampleView, TapView};

/// Events shown per tap read, at most.
#[cfg(feature = "ssr")]
const TAP_PAGE: i64 = 200;

/// Asks the node for up to `limit` events (default 10) of each of `component_keys`; returns
/// the request id to read the answers with (`node.sample.results`).
#[server(endpoint = "node.sample", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn request_sample(
    node_id: String,
    pipeline_id: String,
    component_keys: Vec<String>,
    #[server(default)] limit: Option<i64>,
) -> Result<String, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Node(&node_id)).await?;
    let limit = limit.unwrap_or(10);
    vf_control::requests::request_sample(
        &ctl.db,
        &g.actor,
        &node_id,
        &pipeline_id,
        &component_keys,
        limit,
        ctl.now(),
    )
    .await
    .map_err(fail)
}

/// The answers to a sample request so far, per component, with when it stops waiting.
#[server(endpoint = "node.sample.results", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn sample_results(
    node_id: String,
    request_id: String,
) -> Result<SampleView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Editor, Target::Node(&node_id)).await?;
    let (_, expires_at) = vf_control::requests::request_times(&ctl.db, &node_id, &request_id)
        .await
        .map_err(fail)?;
    let results = vf_control::channel::sample_results(&ctl.db, &node_id, &request_id)
        .await
        .map_err(fail)?;
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    Ok(SampleView {
        now: ctl.now(),
        expires_at,
        results: results
            .into_iter()
            .map(|r| SampleResultView {
                component_key: r.component_key,
                events: r.events.unwrap_or_default().iter().map(pretty).collect(),
                schema: r
                    .schema
                    .unwrap_or_default()
                    .into_iter()
                    .map(|f| {
                        let sample = match f.sample {
                            Some(serde_json::Value::String(s)) => s,
                            Some(v) => v.to_string(),
                            None => String::new(),
                        };
                        (f.path, f.kind, sample)
                    })
                    .collect(),
                error: r.error,
            })
            .collect(),
    })
}

/// Starts a live tap on one component of a pipeline; returns its request id.
#[server(endpoint = "node.tap.start", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn start_tap(
    node_id: String,
    pipeline_id: String,
    component_id: String,
) -> Result<String, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Node(&node_id)).await?;
    vf_control::requests::start_tap(
        &ctl.db,
        &g.actor,
        &node_id,
        &pipeline_id,
        &component_id,
        ctl.now(),
    )
    .await
    .map_err(fail)
}

/// Stops a live tap.
#[server(endpoint = "node.tap.stop", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn stop_tap(node_id: String, request_id: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Node(&node_id)).await?;
    vf_control::requests::stop_tap(&ctl.db, &g.actor, &node_id, &request_id, ctl.now())
        .await
        .map_err(fail)
}

/// A tap's events after entry `after` (0 for the first), at most 200, and its end once the
/// agent reported one.
#[server(endpoint = "node.tap.events", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn tap_events(
    node_id: String,
    request_id: String,
    #[server(default)] after: Option<i64>,
) -> Result<TapView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Editor, Target::Node(&node_id)).await?;
    let entries = vf_control::channel::tap_entries(
        &ctl.db,
        &node_id,
        &request_id,
        after.unwrap_or(0),
        TAP_PAGE,
    )
    .await
    .map_err(fail)?;
    let mut view = TapView {
        events: Vec::new(),
        ended: None,
        last: after.unwrap_or(0),
    };
    for e in entries {
        view.last = view.last.max(e.id);
        if e.kind == vf_control::channel::TAP_END {
            let body: serde_json::Value = serde_json::from_str(&e.body).unwrap_or_default();
            let text = |k: &str| body[k].as_str().unwrap_or("").to_owned();
            view.ended = Some(match (text("status"), text("reason")) {
                (s, r) if r.is_empty() => s,
                (s, r) if s.is_empty() => r,
                (s, r) => format!("{s}: {r}"),
            });
        } else {
            view.events.push((e.id, e.at, e.body));
        }
    }
    Ok(view)
}

/// Has the node restart one pipeline's process.
#[server(endpoint = "node.restart", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn restart_pipeline(node_id: String, pipeline_id: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Editor, Target::Node(&node_id)).await?;
    vf_control::requests::restart(&ctl.db, &g.actor, &node_id, &pipeline_id, ctl.now())
        .await
        .map_err(fail)?;
    Ok(())
}
