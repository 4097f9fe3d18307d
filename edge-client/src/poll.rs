//! Fetching the document (`Source::fetch`: one HTTP request with `If-None-Match`) and the
//! background loop that calls the store's poll step on an interval until it is stopped.

use std::sync::Weak;
use std::time::Duration;

use http::header::{AUTHORIZATION, ETAG, IF_NONE_MATCH};
use http::{HeaderValue, StatusCode};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};
use vf_rolling::EdgeConfig;

use crate::store::Shared;
use crate::{EdgeClientOptions, PollError, StartError};

/// Where and how to fetch the document; built once from checked options.
pub(crate) struct Source {
    client: reqwest::Client,
    url: reqwest::Url,
    authorization: Option<HeaderValue>,
    timeout: Duration,
}

/// What one successful request returned.
pub(crate) enum Fetched {
    /// `304`: the document with the ETag we sent is still current.
    NotModified,
    /// `200`: a document and its ETag (if the server sent one).
    Document {
        config: EdgeConfig,
        etag: Option<String>,
    },
}

impl Source {
    pub(crate) fn new(options: &EdgeClientOptions) -> Result<Source, StartError> {
        let bad_url = |reason: String| StartError::BadUrl {
            url: options.url.clone(),
            reason,
        };
        let url = reqwest::Url::parse(&options.url).map_err(|e| bad_url(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad_url("must start with http:// or https://".to_owned()));
        }
        if options.poll_interval.is_zero() {
            return Err(StartError::ZeroDuration("poll_interval"));
        }
        if options.request_timeout.is_zero() {
            return Err(StartError::ZeroDuration("request_timeout"));
        }
        let authorization = match &options.token {
            None => None,
            Some(token) => Some(bearer(token).ok_or(StartError::BadToken)?),
        };
        let client = reqwest::Client::builder()
            .timeout(options.request_timeout)
            .build()
            .map_err(StartError::Client)?;
        Ok(Source {
            client,
            url,
            authorization,
            timeout: options.request_timeout,
        })
    }

    /// One `GET`, sending `etag` as `If-None-Match` when there is one.
    pub(crate) async fn fetch(&self, etag: Option<&str>) -> Result<Fetched, PollError> {
        let transport = |e: reqwest::Error| PollError::from_reqwest(&e, self.timeout);
        let mut request = self.client.get(self.url.clone());
        if let Some(value) = &self.authorization {
            request = request.header(AUTHORIZATION, value.clone());
        }
        if let Some(etag) = etag {
            request = request.header(IF_NONE_MATCH, etag);
        }
        let response = request.send().await.map_err(transport)?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NOT_MODIFIED if etag.is_some() => return Ok(Fetched::NotModified),
            StatusCode::NOT_MODIFIED => return Err(PollError::UnexpectedNotModified),
            StatusCode::UNAUTHORIZED => return Err(PollError::Unauthorized),
            other => return Err(PollError::Status(other.as_u16())),
        }
        let etag = response
            .headers()
            .get(ETAG)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = response.bytes().await.map_err(transport)?;
        let config =
            serde_json::from_slice(&body).map_err(|e| PollError::BadDocument(e.to_string()))?;
        Ok(Fetched::Document { config, etag })
    }
}

/// `Bearer <token>` as a header value marked sensitive (kept out of debug output).
fn bearer(token: &str) -> Option<HeaderValue> {
    let token = token.trim();
    let printable = !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic());
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .ok()
        .filter(|_| printable)?;
    value.set_sensitive(true);
    Some(value)
}

/// Polls every `every` (the first poll one interval from now: the store's start did the first
/// load) until `stop` turns true or the store is gone. The loop holds the store only weakly between polls, so dropping the last handle of
/// the store drops it, which closes `stop` and ends the loop.
pub(crate) async fn run(store: Weak<Shared>, every: Duration, mut stop: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval_at(Instant::now() + every, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return,
            _ = ticks.tick() => {}
        }
        let Some(shared) = store.upgrade() else {
            return;
        };
        tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return,
            // Failures are recorded in the store's health; nothing more to do here.
            _ = shared.poll_once() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_become_sensitive_bearer_headers() {
        let value = bearer("edge-read-token-0123456789").unwrap();
        assert_eq!(value.to_str().unwrap(), "Bearer edge-read-token-0123456789");
        assert!(value.is_sensitive());
    }

    #[test]
    fn tokens_with_spaces_newlines_or_nothing_are_refused() {
        assert!(bearer("two words").is_none());
        assert!(bearer("line\nbreak").is_none());
        assert!(bearer("   ").is_none());
    }

    #[test]
    fn start_options_are_checked_before_anything_is_spawned() {
        let refused =
            |options: EdgeClientOptions| Source::new(&options).err().map(|e| e.to_string());
        let good = EdgeClientOptions::new("http://127.0.0.1:1/api/edge-config");
        assert!(refused(good.clone()).is_none());
        assert!(refused(EdgeClientOptions::new("vectorflow:3000"))
            .unwrap()
            .starts_with("edge config url"));
        assert!(refused(EdgeClientOptions::new("ftp://vf/api/edge-config"))
            .unwrap()
            .contains("http://"));
        let zero_interval = EdgeClientOptions {
            poll_interval: Duration::ZERO,
            ..good.clone()
        };
        assert_eq!(
            refused(zero_interval).unwrap(),
            "edge config poll_interval must be more than zero"
        );
        let zero_timeout = EdgeClientOptions {
            request_timeout: Duration::ZERO,
            ..good.clone()
        };
        assert!(refused(zero_timeout).is_some());
        assert!(refused(good.with_token("bad token")).is_some());
    }
}
