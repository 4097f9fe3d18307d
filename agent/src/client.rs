//! HTTP client for the agent routes; maps status codes to `AgentError` once.

use std::time::Duration;

use reqwest::{header, Response, StatusCode};
use vf_protocol::{
    ConfigResponse, EnrollRequest, EnrollResponse, Heartbeat, CONFIG_PATH, ENROLL_PATH,
    HEARTBEAT_PATH,
};

use crate::error::{AgentError, Result};

/// Longest single request; a hung server must not freeze the poll loop.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest `Retry-After` honoured, so a bogus header cannot park the agent for days.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// Longest error body kept for the log.
const MAX_ERROR_BODY: usize = 512;

/// Answer of `POST /api/agent/config`.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigPoll {
    /// 200: the full desired state, with the ETag to send next time.
    Changed {
        config: Box<ConfigResponse>,
        etag: Option<String>,
    },
    /// 304: nothing changed since the ETag we sent.
    NotModified,
}

/// A client bound to one server.
#[derive(Debug, Clone)]
pub struct ServerClient {
    http: reqwest::Client,
    base: String,
}

impl ServerClient {
    pub fn new(server_url: &str) -> Result<Self> {
        Self::with_root(server_url, None)
    }

    /// A client that also trusts `extra_root` (`--ca-file`).
    pub fn with_root(server_url: &str, extra_root: Option<&reqwest::Certificate>) -> Result<Self> {
        let mut builder = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("vf-agent/", env!("CARGO_PKG_VERSION")));
        if let Some(root) = extra_root {
            builder = builder.add_root_certificate(root.clone());
        }
        let http = builder.build()?;
        Ok(ServerClient {
            http,
            base: server_url.trim_end_matches('/').to_string(),
        })
    }

    /// `POST /api/agent/enroll`.
    pub async fn enroll(&self, request: &EnrollRequest) -> Result<EnrollResponse> {
        let response = self
            .http
            .post(format!("{}{ENROLL_PATH}", self.base))
            .json(request)
            .send()
            .await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            return Err(AgentError::EnrollmentRejected);
        }
        Ok(ok(response).await?.json().await?)
    }

    /// `POST /api/agent/config`: reports `heartbeat` and fetches the desired state.
    pub async fn poll_config(
        &self,
        node_token: &str,
        heartbeat: &Heartbeat,
        etag: Option<&str>,
    ) -> Result<ConfigPoll> {
        let mut request = self
            .http
            .post(format!("{}{CONFIG_PATH}", self.base))
            .bearer_auth(node_token)
            .json(heartbeat);
        if let Some(etag) = etag {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        let response = request.send().await?;
        if response.status() == StatusCode::NOT_MODIFIED {
            return Ok(ConfigPoll::NotModified);
        }
        let response = ok(response).await?;
        let etag = response
            .headers()
            .get(header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let config = response.json().await?;
        Ok(ConfigPoll::Changed {
            config: Box::new(config),
            etag,
        })
    }

    /// `POST /api/agent/heartbeat`: report without polling.
    pub async fn heartbeat(&self, node_token: &str, heartbeat: &Heartbeat) -> Result<()> {
        self.post(HEARTBEAT_PATH, node_token, heartbeat).await
    }

    /// `POST` of a JSON body to one of the agent routes that answer `{"ok": true}`
    /// (heartbeat, logs, samples, tap events).
    pub async fn post(
        &self,
        path: &str,
        node_token: &str,
        body: &impl serde::Serialize,
    ) -> Result<()> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(node_token)
            .json(body)
            .send()
            .await?;
        ok(response).await.map(drop)
    }
}

/// Passes 2xx through; turns everything else into the matching error.
async fn ok(response: Response) -> Result<Response> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    match status {
        StatusCode::UNAUTHORIZED => Err(AgentError::Unauthorized),
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
            Err(AgentError::Overloaded {
                status: status.as_u16(),
                retry_after: retry_after(&response),
            })
        }
        _ => {
            let mut body = response.text().await.unwrap_or_default();
            if body.len() > MAX_ERROR_BODY {
                let mut cut = MAX_ERROR_BODY;
                while !body.is_char_boundary(cut) {
                    cut -= 1;
                }
                body.truncate(cut);
            }
            Err(AgentError::Status {
                status: status.as_u16(),
                body,
            })
        }
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not used by the server).
fn retry_after(response: &Response) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}
