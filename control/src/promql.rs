//! The PromQL client of the customPromQL gate: one instant query against
//! `$VF_PROMETHEUS_URL/api/v1/query`, bounded by a timeout. Reading the answer is a rule and
//! lives in `vf_rules::promql`; this file only fetches.
//!
//! The bearer token goes in the `Authorization` header and nowhere else: not in URLs, logs,
//! errors, gate evidence or `Debug` output.

use std::time::Duration;

use vf_rules::PromQlOutcome;

/// Where and how to query Prometheus.
#[derive(Clone, PartialEq)]
pub struct PromSettings {
    /// Base URL, e.g. `http://prometheus:9090`.
    pub url: String,
    pub bearer_token: Option<String>,
    pub timeout: Duration,
}

impl std::fmt::Debug for PromSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromSettings")
            .field("url", &self.url)
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Runs one instant query. Never fails: every problem becomes an outcome the gate fails
/// closed on, with a reason that names it.
pub async fn instant_query(
    client: &reqwest::Client,
    settings: &PromSettings,
    query: &str,
) -> PromQlOutcome {
    let url = format!("{}/api/v1/query", settings.url.trim_end_matches('/'));
    let mut req = client
        .get(&url)
        .query(&[("query", query)])
        .timeout(settings.timeout);
    if let Some(token) = &settings.bearer_token {
        req = req.bearer_auth(token);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return outcome_of(&e),
    };
    let status = resp.status().as_u16();
    match resp.text().await {
        Ok(body) => PromQlOutcome::Response {
            http_status: status,
            // A server may quote the credential back in an error; it must not reach a reason.
            body: match &settings.bearer_token {
                Some(token) if !token.is_empty() => body.replace(token.as_str(), "<redacted>"),
                _ => body,
            },
        },
        Err(e) => outcome_of(&e),
    }
}

fn outcome_of(e: &reqwest::Error) -> PromQlOutcome {
    // reqwest's messages carry the URL; keep only the kind of failure.
    if e.is_timeout() {
        PromQlOutcome::Timeout
    } else if e.is_connect() {
        PromQlOutcome::ConnectError("connection refused or unreachable".into())
    } else if e.is_body() || e.is_decode() {
        PromQlOutcome::Other("could not read the response body".into())
    } else {
        PromQlOutcome::Other("request failed".into())
    }
}
