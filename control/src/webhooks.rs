//! Webhooks: per environment, admins register URLs that hear of release events (created, a
//! stage started, a gate failed, held, paused, completed, rolled back, the line stopped).
//!
//! Delivery is an outbox. [`enqueue`] runs inside [`crate::audit`]'s append, so a delivery is
//! written in the same transaction as the transition it reports: it exists exactly when the
//! transition committed, and writing it never blocks or fails a transition on the network.
//! A worker ([`run`]) sends what is due, at least once: a failed attempt is retried with
//! exponential backoff ([`retry_in_ms`]) until 24 h after the event, surviving restarts
//! (the outbox is in the database). Two replicas may both send a delivery; its id is the
//! idempotency key receivers deduplicate on.
//!
//! Each request carries `X-VectorFlow-Timestamp` (unix seconds) and
//! `X-VectorFlow-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the secret>`
//! ([`signature`]). Secrets are shown once, when created, and never logged or listed.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::Sha256;
use sqlx::AnyConnection;

use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::ids::{new_id, new_token};
use crate::{Control, ControlError, Db, Result};

/// The events a webhook may ask for.
pub use vf_rules::events::WEBHOOK_EVENTS as EVENTS;

/// How long after its event a delivery is still retried.
pub const GIVE_UP_AFTER_MS: i64 = 24 * 3600 * 1000;
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a worker holds the deliveries it claimed before another may take them.
const CLAIM_MS: i64 = 60_000;
/// Deliveries one worker pass sends, at most.
const BATCH: i64 = 20;

/// The events an audited action is, given its details: a hold or rollback whose gate
/// results include a failure is also `gate.failed`.
pub fn events_of(action: AuditAction, details: &Value) -> Vec<&'static str> {
    let gate_failed = || {
        details["gateResults"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r.as_array().cloned().unwrap_or_else(|| vec![r.clone()]))
            .any(|r| r["verdict"] == "fail")
    };
    let main = match action {
        AuditAction::ReleaseCreate => "release.created",
        AuditAction::ReleaseAdvance => "stage.started",
        AuditAction::ReleaseHold => "release.held",
        AuditAction::ReleasePause => "release.paused",
        AuditAction::ReleaseComplete => "release.completed",
        AuditAction::ReleaseRollback => "release.rolled_back",
        AuditAction::EnvironmentLineStop => "line.stopped",
        AuditAction::EnvironmentFreezeStart => "freeze.started",
        AuditAction::EnvironmentFreezeEnd => "freeze.ended",
        _ => return Vec::new(),
    };
    let mut events = Vec::new();
    if matches!(
        action,
        AuditAction::ReleaseHold | AuditAction::ReleaseRollback
    ) && gate_failed()
    {
        events.push("gate.failed");
    }
    events.push(main);
    events
}

/// `sha256=<hex>` of the HMAC-SHA256 of `"<timestamp>.<body>"` keyed with `secret`.
pub fn signature(secret: &str, timestamp: i64, body: &str) -> String {
    // An HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(format!("{timestamp}.{body}").as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// When attempt `attempts + 1` follows a failed attempt `attempts` (1-based): 10 s, doubling,
/// at most an hour apart.
pub fn retry_in_ms(attempts: i64) -> i64 {
    let doubled = 10_000i64.saturating_mul(1i64 << attempts.clamp(1, 20).saturating_sub(1));
    doubled.min(3_600_000)
}

/// A Slack-compatible body (`{"text": ...}`) for an event's JSON body.
pub fn slack_text(body: &Value) -> Value {
    let event = body["event"].as_str().unwrap_or("event");
    let release = &body["release"];
    let (mut text, subject) = if release.is_object() {
        let text = format!(
            "VectorFlow: {event} - release {} of pipeline {}",
            release["id"].as_str().unwrap_or("?"),
            release["pipelineId"].as_str().unwrap_or("?"),
        );
        (text, release)
    } else {
        let environment = &body["environment"];
        let text = format!(
            "VectorFlow: {event} - environment {}",
            environment["id"].as_str().unwrap_or("?")
        );
        (text, environment)
    };
    if let Some(reason) = subject["reason"].as_str().filter(|r| !r.is_empty()) {
        text.push_str(&format!(": {reason}"));
    }
    json!({ "text": text })
}

/// A registered webhook, without its secret.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct WebhookRow {
    pub id: String,
    pub environment_id: String,
    pub url: String,
    /// JSON array of event names.
    pub events: String,
    pub slack: i64,
    pub created_by: String,
    pub created_at: i64,
}

impl WebhookRow {
    pub fn event_names(&self) -> Vec<String> {
        serde_json::from_str(&self.events).unwrap_or_default()
    }
}

/// One delivery as the deliveries page shows it (the body stays in the database).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct DeliveryRow {
    pub id: String,
    pub webhook_id: String,
    pub event: String,
    /// `pending`, `delivered` or `failed` (gave up after 24 h).
    pub status: String,
    pub attempts: i64,
    pub created_at: i64,
    pub next_attempt_at: Option<i64>,
    pub last_attempt_at: Option<i64>,
    pub response_code: Option<i64>,
    pub latency_ms: Option<i64>,
    pub error: Option<String>,
}

const WEBHOOK_COLUMNS: &str = "id, environment_id, url, events, slack, created_by, created_at";
const DELIVERY_COLUMNS: &str = "id, webhook_id, event, status, attempts, created_at, \
    next_attempt_at, last_attempt_at, response_code, latency_ms, error";

/// Registers a webhook; returns it and its secret (the one given, or a new one), which is
/// shown this once.
#[allow(clippy::too_many_arguments)]
pub async fn create(
    db: &Db,
    actor: &Actor,
    environment_id: &str,
    url: &str,
    events: &[String],
    slack: bool,
    secret: Option<&str>,
    now: i64,
) -> Result<(WebhookRow, String)> {
    let url = url.trim();
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| ControlError::invalid("url", format!("not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ControlError::invalid(
            "url",
            "must be an http:// or https:// URL",
        ));
    }
    if events.is_empty() {
        return Err(ControlError::invalid("events", "name at least one event"));
    }
    for (i, e) in events.iter().enumerate() {
        if !EVENTS.contains(&e.as_str()) {
            return Err(ControlError::invalid(
                format!("events[{i}]"),
                format!("unknown event {e:?}; one of {}", EVENTS.join(", ")),
            ));
        }
    }
    let secret = match secret.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) if s.len() < 16 => {
            return Err(ControlError::invalid("secret", "at least 16 characters"))
        }
        Some(s) => s.to_owned(),
        None => new_token("vfw_"),
    };
    crate::fleet::get_environment(db, environment_id).await?;
    let row = WebhookRow {
        id: new_id(),
        environment_id: environment_id.to_owned(),
        url: url.to_owned(),
        events: serde_json::to_string(events)?,
        slack: i64::from(slack),
        created_by: actor.name.clone(),
        created_at: now,
    };
    let mut tx = audit::begin(db).await?;
    sqlx::query(
        "INSERT INTO webhooks (id, environment_id, url, secret, events, slack, created_by, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&row.id)
    .bind(&row.environment_id)
    .bind(&row.url)
    .bind(&secret)
    .bind(&row.events)
    .bind(row.slack)
    .bind(&row.created_by)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::WebhookCreate,
            target_id: &row.id,
            environment_id: Some(environment_id),
            details: json!({ "url": row.url, "events": events, "slack": slack }),
        },
    )
    .await?;
    Ok((row, secret))
}

pub async fn list(db: &Db, environment_id: &str) -> Result<Vec<WebhookRow>> {
    Ok(sqlx::query_as(crate::sql!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE environment_id = $1 ORDER BY created_at, id"
    ))
    .bind(environment_id)
    .fetch_all(&db.read)
    .await?)
}

pub async fn get(db: &Db, id: &str) -> Result<WebhookRow> {
    sqlx::query_as(crate::sql!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("webhook {id}")))
}

/// Removes a webhook and its deliveries.
pub async fn delete(db: &Db, actor: &Actor, id: &str, now: i64) -> Result<()> {
    let row = get(db, id).await?;
    let mut tx = audit::begin(db).await?;
    sqlx::query("DELETE FROM webhook_deliveries WHERE webhook_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM webhooks WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::WebhookDelete,
            target_id: id,
            environment_id: Some(&row.environment_id),
            details: json!({ "url": row.url }),
        },
    )
    .await
}

/// A webhook's newest deliveries, newest first.
pub async fn deliveries(db: &Db, webhook_id: &str, limit: i64) -> Result<Vec<DeliveryRow>> {
    Ok(sqlx::query_as(crate::sql!(
        "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1
         ORDER BY created_at DESC, id DESC LIMIT $2"
    ))
    .bind(webhook_id)
    .bind(limit)
    .fetch_all(&db.read)
    .await?)
}

/// Sends a delivery again at the worker's next pass (whatever became of it before).
pub async fn redeliver(db: &Db, delivery_id: &str, now: i64) -> Result<()> {
    let done = sqlx::query(
        "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $1,
            claimed_until = NULL, created_at = CASE WHEN created_at < $2 THEN $1 ELSE created_at END
         WHERE id = $3",
    )
    .bind(now)
    .bind(now - GIVE_UP_AFTER_MS)
    .bind(delivery_id)
    .execute(&db.pool)
    .await?;
    if done.rows_affected() == 0 {
        return Err(ControlError::NotFound(format!("delivery {delivery_id}")));
    }
    Ok(())
}

/// Writes a delivery for each webhook of the entry's environment that asked for one of its
/// events, inside the audited transaction ([`crate::audit`] calls it).
pub(crate) async fn enqueue(
    conn: &mut AnyConnection,
    now: i64,
    entry: &AuditEntry<'_>,
) -> Result<()> {
    let events = events_of(entry.action, &entry.details);
    let Some(environment_id) = entry.environment_id.filter(|_| !events.is_empty()) else {
        return Ok(());
    };
    let hooks: Vec<(String, String)> =
        sqlx::query_as("SELECT id, events FROM webhooks WHERE environment_id = $1")
            .bind(environment_id)
            .fetch_all(&mut *conn)
            .await?;
    for (webhook_id, wanted) in hooks {
        let wanted: Vec<String> = serde_json::from_str(&wanted).unwrap_or_default();
        for event in events.iter().filter(|e| wanted.iter().any(|w| w == *e)) {
            let id = new_id();
            // The release (or environment) with the transition's evidence, under its kind.
            let mut subject = entry.details.clone();
            subject["id"] = json!(entry.target_id);
            let mut body = json!({
                "id": id,
                "event": event,
                "at": now,
                "environmentId": environment_id,
                "actor": entry.actor.name,
                "action": entry.action.as_str(),
            });
            body[entry.action.target_kind()] = subject;
            sqlx::query(
                "INSERT INTO webhook_deliveries (id, webhook_id, event, body, status, created_at,
                    next_attempt_at)
                 VALUES ($1, $2, $3, $4, 'pending', $5, $5)",
            )
            .bind(&id)
            .bind(&webhook_id)
            .bind(*event)
            .bind(body.to_string())
            .bind(now)
            .execute(&mut *conn)
            .await?;
        }
    }
    Ok(())
}

/// A claimed delivery with what sending it needs.
#[derive(sqlx::FromRow)]
struct Due {
    id: String,
    event: String,
    body: String,
    attempts: i64,
    created_at: i64,
    url: String,
    secret: String,
    slack: i64,
}

/// What one attempt came to.
struct Attempt {
    code: Option<i64>,
    latency_ms: i64,
    error: Option<String>,
}

/// Sends the deliveries due at `now` (claimed first, so two workers do not take the same
/// one); returns how many were attempted.
pub async fn deliver_due(ctl: &Control, http: &reqwest::Client) -> Result<usize> {
    let now = ctl.now();
    let claimed: Vec<(String,)> = sqlx::query_as(
        "UPDATE webhook_deliveries SET claimed_until = $1
         WHERE id IN (SELECT id FROM webhook_deliveries
                      WHERE status = 'pending' AND next_attempt_at <= $2
                        AND (claimed_until IS NULL OR claimed_until < $2)
                      ORDER BY next_attempt_at LIMIT $3)
         RETURNING id",
    )
    .bind(now + CLAIM_MS)
    .bind(now)
    .bind(BATCH)
    .fetch_all(&ctl.db.pool)
    .await?;
    for (id,) in &claimed {
        let due: Option<Due> = sqlx::query_as(
            "SELECT d.id, d.event, d.body, d.attempts, d.created_at, w.url, w.secret, w.slack
             FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = $1",
        )
        .bind(id)
        .fetch_optional(&ctl.db.pool)
        .await?;
        let Some(due) = due else { continue };
        let attempt = send(http, &due, ctl.now()).await;
        record(ctl, &due, attempt).await?;
    }
    Ok(claimed.len())
}

async fn send(http: &reqwest::Client, due: &Due, now_ms: i64) -> Attempt {
    let body = if due.slack != 0 {
        let parsed: Value = serde_json::from_str(&due.body).unwrap_or_default();
        slack_text(&parsed).to_string()
    } else {
        due.body.clone()
    };
    let timestamp = now_ms / 1000;
    let started = std::time::Instant::now();
    let sent = http
        .post(&due.url)
        .timeout(ATTEMPT_TIMEOUT)
        .header("content-type", "application/json")
        .header("user-agent", "VectorFlow-Webhooks")
        .header("x-vectorflow-event", &due.event)
        .header("x-vectorflow-delivery", &due.id)
        .header("idempotency-key", &due.id)
        .header("x-vectorflow-timestamp", timestamp.to_string())
        .header(
            "x-vectorflow-signature",
            signature(&due.secret, timestamp, &body),
        )
        .body(body)
        .send()
        .await;
    let latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    match sent {
        Ok(resp) if resp.status().is_success() => Attempt {
            code: Some(i64::from(resp.status().as_u16())),
            latency_ms,
            error: None,
        },
        Ok(resp) => Attempt {
            code: Some(i64::from(resp.status().as_u16())),
            latency_ms,
            error: Some(format!("answered HTTP {}", resp.status().as_u16())),
        },
        // The error names the host, never the secret or the body.
        Err(e) => Attempt {
            code: None,
            latency_ms,
            error: Some(e.without_url().to_string()),
        },
    }
}

async fn record(ctl: &Control, due: &Due, attempt: Attempt) -> Result<()> {
    let now = ctl.now();
    let attempts = due.attempts + 1;
    let (status, next) = match &attempt.error {
        None => ("delivered", None),
        Some(_) if now - due.created_at >= GIVE_UP_AFTER_MS => ("failed", None),
        Some(_) => ("pending", Some(now + retry_in_ms(attempts))),
    };
    if let Some(error) = &attempt.error {
        tracing::warn!(delivery = %due.id, event = %due.event, attempts, status, "webhook delivery failed: {error}");
    }
    sqlx::query(
        "UPDATE webhook_deliveries SET status = $1, attempts = $2, next_attempt_at = $3,
            claimed_until = NULL, last_attempt_at = $4, response_code = $5, latency_ms = $6,
            error = $7
         WHERE id = $8",
    )
    .bind(status)
    .bind(attempts)
    .bind(next)
    .bind(now)
    .bind(attempt.code)
    .bind(attempt.latency_ms)
    .bind(&attempt.error)
    .bind(&due.id)
    .execute(&ctl.db.pool)
    .await?;
    Ok(())
}

/// The worker: sends due deliveries every `every` until `stop` turns true.
pub async fn run(ctl: Control, every: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
    let http = match reqwest::Client::builder().build() {
        Ok(http) => http,
        Err(e) => {
            tracing::error!("webhooks: cannot build an HTTP client: {e}");
            return;
        }
    };
    loop {
        let gone = tokio::select! {
            _ = tokio::time::sleep(every) => false,
            changed = stop.changed() => changed.is_err(),
        };
        if gone || *stop.borrow() {
            return;
        }
        if let Err(e) = deliver_due(&ctl, &http).await {
            tracing::warn!(error = %e, "webhooks: a delivery pass failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_the_hmac_of_timestamp_dot_body() {
        // The expected value is Python's: hmac.new(b"key", b"1700000000.{}", sha256).
        assert_eq!(
            signature("key", 1_700_000_000, "{}"),
            "sha256=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
        );
        assert_ne!(signature("key", 1, "{}"), signature("key", 2, "{}"));
        assert_ne!(signature("a", 1, "{}"), signature("b", 1, "{}"));
    }

    #[test]
    fn retries_back_off_from_10_s_to_an_hour() {
        assert_eq!(retry_in_ms(1), 10_000);
        assert_eq!(retry_in_ms(2), 20_000);
        assert_eq!(retry_in_ms(5), 160_000);
        assert_eq!(retry_in_ms(12), 3_600_000);
        assert_eq!(retry_in_ms(1000), 3_600_000);
    }

    #[test]
    fn actions_map_to_events_and_a_failed_gate_is_its_own_event() {
        let none = json!({});
        assert_eq!(
            events_of(AuditAction::ReleaseCreate, &none),
            ["release.created"]
        );
        assert_eq!(
            events_of(AuditAction::ReleaseAdvance, &none),
            ["stage.started"]
        );
        assert_eq!(events_of(AuditAction::ReleaseHold, &none), ["release.held"]);
        let failed = json!({"gateResults": [[{"gate": "errorRate", "verdict": "fail"}]]});
        assert_eq!(
            events_of(AuditAction::ReleaseRollback, &failed),
            ["gate.failed", "release.rolled_back"]
        );
        assert!(events_of(AuditAction::PipelineDeploy, &none).is_empty());
        assert!(events_of(AuditAction::WebhookCreate, &none).is_empty());
    }

    #[test]
    fn the_slack_body_is_one_line_of_text() {
        let body = json!({"event": "release.rolled_back",
                          "release": {"id": "r1", "pipelineId": "p1", "reason": "stage 1 failed"}});
        assert_eq!(
            slack_text(&body),
            json!({"text": "VectorFlow: release.rolled_back - release r1 of pipeline p1: stage 1 failed"})
        );
    }
}
