//! The server's API as vfctl calls it: server functions (`POST /api/<endpoint>` with a JSON
//! body, docs/api.md) with an API token. Errors carry the server's own message, which names
//! the field or the refusal reason.

use std::time::Duration;

use serde_json::Value;

/// Longest single call.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The server refused or failed the call: its status and message.
    #[error("{endpoint}: {message} (HTTP {status})")]
    Refused {
        endpoint: String,
        status: u16,
        message: String,
    },
    #[error("cannot reach {server}: {message}")]
    Unreachable { server: String, message: String },
    /// Bad input on this side (a file, an argument): what and why.
    #[error("{0}")]
    Input(String),
}

/// A server and the token to call it with.
#[derive(Debug, Clone)]
pub struct Api {
    server: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    pub fn new(server: &str, token: &str) -> Result<Api, CliError> {
        let server = server.trim_end_matches('/').to_owned();
        if !(server.starts_with("http://") || server.starts_with("https://")) {
            return Err(CliError::Input(format!(
                "--server: {server:?} is not an http:// or https:// URL"
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .user_agent(concat!("vfctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CliError::Input(format!("cannot build an HTTP client: {e}")))?;
        Ok(Api {
            server,
            token: token.to_owned(),
            http,
        })
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// Calls server function `endpoint` with `body`; its JSON answer, or why not.
    pub async fn call(&self, endpoint: &str, body: Value) -> Result<Value, CliError> {
        let resp = self
            .http
            .post(format!("{}/api/{endpoint}", self.server))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .map_err(|e| CliError::Unreachable {
                server: self.server.clone(),
                message: e.to_string(),
            })?;
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        if status == 200 {
            return serde_json::from_str(&text).map_err(|e| CliError::Refused {
                endpoint: endpoint.to_owned(),
                status,
                message: format!("the answer is not JSON ({e})"),
            });
        }
        Err(CliError::Refused {
            endpoint: endpoint.to_owned(),
            status,
            message: refusal(status, &text),
        })
    }
}

/// The message of a refused call: the server function's error text (`ServerError|<message>`
/// or `{"error": ...}`), or a hint for the statuses that have none.
pub fn refusal(status: u16, body: &str) -> String {
    let body = body.trim();
    let message = body
        .strip_prefix("ServerError|")
        .map(str::to_owned)
        .or_else(|| {
            serde_json::from_str::<Value>(body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_owned))
        })
        .unwrap_or_else(|| body.chars().take(500).collect());
    match (status, message.is_empty()) {
        (401, _) => "the server refused the token; run `vfctl login` or set VF_API_TOKEN".into(),
        (_, true) => format!("HTTP {status} without a message"),
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_keep_the_servers_message() {
        assert_eq!(
            refusal(
                400,
                "ServerError|rolloutPlan.stages[0].bakeSeconds: must be at least 30"
            ),
            "rolloutPlan.stages[0].bakeSeconds: must be at least 30"
        );
        assert_eq!(
            refusal(409, r#"{"error":"a release is in flight"}"#),
            "a release is in flight"
        );
        assert!(refusal(401, "ServerError|unauthorized").contains("vfctl login"));
        assert_eq!(refusal(502, ""), "HTTP 502 without a message");
    }

    #[test]
    fn the_server_must_be_an_http_url() {
        assert!(Api::new("localhost:3000", "t").is_err());
        assert_eq!(
            Api::new("http://h:3000/", "t").unwrap().server(),
            "http://h:3000"
        );
    }
}
