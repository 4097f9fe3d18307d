//! Server functions of webhooks: admins of an environment register URLs that hear of its
//! release events, list them and their deliveries, delete them, and send a delivery again.
//! Secrets are returned once, by `webhook.create`, and never again.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{CreatedWebhook, DeliveryView, WebhookView};

/// Deliveries listed per webhook, newest first.
#[cfg(feature = "ssr")]
const DELIVERIES_SHOWN: i64 = 100;

#[cfg(feature = "ssr")]
fn webhook_view(w: vf_control::webhooks::WebhookRow) -> WebhookView {
    WebhookView {
        events: w.event_names(),
        id: w.id,
        url: w.url,
        slack: w.slack != 0,
        created_by: w.created_by,
        created_at: w.created_at,
    }
}

/// Registers a webhook for `events` of the environment; `secret` (16 characters or more)
/// or a generated one signs its deliveries and is returned this once.
#[server(endpoint = "webhook.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn create_webhook(
    environment_id: String,
    url: String,
    events: Vec<String>,
    #[server(default)] slack: bool,
    #[server(default)] secret: Option<String>,
) -> Result<CreatedWebhook, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Environment(&environment_id)).await?;
    let (row, secret) = vf_control::webhooks::create(
        &ctl.db,
        &g.actor,
        &environment_id,
        &url,
        &events,
        slack,
        secret.as_deref(),
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    Ok(CreatedWebhook {
        webhook: webhook_view(row),
        secret,
    })
}

/// The environment's webhooks (never their secrets).
#[server(endpoint = "webhook.list", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_webhooks(environment_id: String) -> Result<Vec<WebhookView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Admin, Target::Environment(&environment_id)).await?;
    let rows = vf_control::webhooks::list(&ctl.db, &environment_id)
        .await
        .map_err(fail)?;
    Ok(rows.into_iter().map(webhook_view).collect())
}

/// Deletes a webhook and its deliveries.
#[server(endpoint = "webhook.delete", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn delete_webhook(id: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Webhook(&id)).await?;
    vf_control::webhooks::delete(&ctl.db, &g.actor, &id, ctl.now())
        .await
        .map_err(fail)
}

/// A webhook's newest 100 deliveries, newest first: status, attempts, response code,
/// latency and the last error.
#[server(endpoint = "webhook.deliveries", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn webhook_deliveries(webhook_id: String) -> Result<Vec<DeliveryView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Admin, Target::Webhook(&webhook_id)).await?;
    let rows = vf_control::webhooks::deliveries(&ctl.db, &webhook_id, DELIVERIES_SHOWN)
        .await
        .map_err(fail)?;
    Ok(rows
        .into_iter()
        .map(|d| DeliveryView {
            id: d.id,
            event: d.event,
            status: d.status,
            attempts: d.attempts,
            created_at: d.created_at,
            next_attempt_at: d.next_attempt_at,
            last_attempt_at: d.last_attempt_at,
            response_code: d.response_code,
            latency_ms: d.latency_ms,
            error: d.error,
        })
        .collect())
}

/// Sends a delivery again at the worker's next pass.
#[server(endpoint = "webhook.redeliver", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn redeliver(delivery_id: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Admin, Target::WebhookDelivery(&delivery_id)).await?;
    vf_control::webhooks::redeliver(&ctl.db, &delivery_id, ctl.now())
        .await
        .map_err(fail)
}
