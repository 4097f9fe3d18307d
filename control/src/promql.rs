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

/// Names what went wrong, from reqwest's error and its causes. reqwest's own messages carry
/// the URL (and so possibly credentials in it), so only the kind of failure is kept.
fn outcome_of(e: &reqwest::Error) -> PromQlOutcome {
    if e.is_timeout() {
        return PromQlOutcome::Timeout;
    }
    if e.is_builder() {
        return PromQlOutcome::Other("VF_PROMETHEUS_URL is not a usable URL".into());
    }
    if e.is_redirect() {
        return PromQlOutcome::Other("Prometheus answered with too many redirects".into());
    }
    let failure = Failure::of(e);
    match failure {
        Failure::Dns => {
            PromQlOutcome::ConnectError("DNS lookup of the Prometheus host failed".into())
        }
        Failure::Tls(detail) => {
            PromQlOutcome::ConnectError(format!("TLS handshake failed: {detail}"))
        }
        Failure::Refused => PromQlOutcome::ConnectError("connection refused".into()),
        Failure::Unreachable => PromQlOutcome::ConnectError("network or host unreachable".into()),
        Failure::TimedOut => PromQlOutcome::Timeout,
        Failure::Closed if e.is_body() || e.is_decode() => PromQlOutcome::Other(
            "Prometheus closed the connection in the middle of its answer".into(),
        ),
        Failure::Closed => {
            PromQlOutcome::Other("Prometheus closed the connection without answering".into())
        }
        Failure::NotHttp => {
            PromQlOutcome::Other("Prometheus answered with something that is not HTTP".into())
        }
        Failure::Unknown if e.is_connect() => {
            PromQlOutcome::ConnectError("could not connect".into())
        }
        Failure::Unknown if e.is_body() || e.is_decode() => {
            PromQlOutcome::Other("could not read the response body".into())
        }
        Failure::Unknown => PromQlOutcome::Other("request failed before an answer arrived".into()),
    }
}

/// The kinds of transport failure a reason is given for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    Dns,
    Tls(String),
    Refused,
    Unreachable,
    TimedOut,
    Closed,
    NotHttp,
    Unknown,
}

impl Failure {
    /// Walks the cause chain; the first cause that tells decides.
    fn of(cause: &(dyn std::error::Error + 'static)) -> Failure {
        if let Some(f) = Self::of_one(cause) {
            return f;
        }
        // io::Error's `source` skips the error it wraps (often another io::Error around a
        // rustls one): look inside it first.
        let wrapped = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| Self::of(inner));
        match (wrapped, cause.source()) {
            (Some(f), _) if f != Failure::Unknown => f,
            (_, Some(next)) => Self::of(next),
            _ => Failure::Unknown,
        }
    }

    fn of_one(cause: &(dyn std::error::Error + 'static)) -> Option<Failure> {
        use std::io::ErrorKind;
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(Failure::Tls(tls.to_string()));
        }
        if let Some(h) = cause.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_closed() || h.is_canceled() {
                return Some(Failure::Closed);
            }
            if h.is_parse() {
                return Some(Failure::NotHttp);
            }
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::ConnectionRefused => return Some(Failure::Refused),
                ErrorKind::NetworkUnreachable | ErrorKind::HostUnreachable => {
                    return Some(Failure::Unreachable)
                }
                ErrorKind::TimedOut => return Some(Failure::TimedOut),
                ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof => return Some(Failure::Closed),
                _ => {}
            }
        }
        // hyper-util names a failed resolution "dns error"; its type is private.
        cause
            .to_string()
            .starts_with("dns error")
            .then_some(Failure::Dns)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-shot server on loopback that reads the request, then does `answer` to the socket.
    async fn server(answer: &'static [u8], close_at_once: bool) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                if !close_at_once {
                    let _ = socket.write_all(answer).await;
                }
                drop(socket);
            }
        });
        format!("{addr}")
    }

    async fn query(url: String) -> PromQlOutcome {
        let settings = PromSettings {
            url,
            bearer_token: None,
            timeout: Duration::from_secs(3),
        };
        instant_query(&reqwest::Client::new(), &settings, "up").await
    }

    #[tokio::test]
    async fn a_prometheus_that_closes_the_connection_without_answering_is_named() {
        let addr = server(b"", true).await;
        assert_eq!(
            query(format!("http://{addr}")).await,
            PromQlOutcome::Other("Prometheus closed the connection without answering".into())
        );
    }

    #[tokio::test]
    async fn an_answer_cut_off_midway_is_named() {
        let addr = server(
            b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"status\":",
            false,
        )
        .await;
        assert_eq!(
            query(format!("http://{addr}")).await,
            PromQlOutcome::Other(
                "Prometheus closed the connection in the middle of its answer".into()
            )
        );
    }

    #[tokio::test]
    async fn an_answer_that_is_not_http_is_named() {
        let addr = server(b"SSH-2.0-OpenSSH_9.2\r\n\r\n", false).await;
        assert_eq!(
            query(format!("http://{addr}")).await,
            PromQlOutcome::Other("Prometheus answered with something that is not HTTP".into())
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_named() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        assert_eq!(
            query(format!("http://{addr}")).await,
            PromQlOutcome::ConnectError("connection refused".into())
        );
    }

    #[tokio::test]
    async fn a_failed_tls_handshake_is_named_with_what_tls_said() {
        // https:// against a plain-HTTP answer: the handshake reads garbage.
        let addr = server(
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
            false,
        )
        .await;
        match query(format!("https://{addr}")).await {
            PromQlOutcome::ConnectError(reason) => {
                assert!(reason.starts_with("TLS handshake failed: "), "{reason}")
            }
            other => panic!("expected a TLS failure, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_host_that_does_not_resolve_is_named_as_a_dns_failure() {
        // `.invalid` never resolves (RFC 6761).
        assert_eq!(
            query("http://vf-no-such-host.invalid:9090".into()).await,
            PromQlOutcome::ConnectError("DNS lookup of the Prometheus host failed".into())
        );
    }
}
