//! The load generator: keep-alive HTTP/1.1 connections on loopback, each sending the next
//! request as soon as the previous answer is read, for a fixed time. A hand-written client
//! (write the request, read the head, read Content-Length bytes) costs far less CPU than a
//! general one, so on a 2-core machine more of it is left for the server being measured.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One keep-alive connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// A response's status and headers (lowercase names); the body is read and dropped.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr)
            .await
            .expect("connect to the server");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Conn {
            stream,
            buf: Vec::with_capacity(16 * 1024),
        }
    }

    /// Sends one request (complete bytes) and reads its answer.
    pub async fn send(&mut self, request: &[u8]) -> Answer {
        self.stream
            .write_all(request)
            .await
            .expect("write a request");
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().await;
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP answer: {head:?}"));
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        assert!(
            !headers
                .iter()
                .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked")),
            "the load client reads Content-Length bodies only: {head}"
        );
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while self.buf.len() < head_end + length {
            self.fill().await;
        }
        self.buf.drain(..head_end + length);
        Answer { status, headers }
    }

    async fn fill(&mut self) {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await.expect("read an answer");
        assert!(n > 0, "the server closed a keep-alive connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `GET path` with the given extra header lines (each ending in `\r\n`).
pub fn get(path: &str, headers: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: bench\r\n{headers}\r\n").into_bytes()
}

/// `POST path` with a JSON body.
pub fn post_json(path: &str, headers: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: bench\r\n{headers}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// What one timed run measured.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Answers whose status was not the one expected.
    pub unexpected: usize,
}

/// Sends `requests` round-robin over `connections` keep-alive connections for `duration`;
/// every answer must have status `expect`.
pub async fn run(
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
    requests: Arc<Vec<Vec<u8>>>,
    expect: u16,
) -> Run {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for c in 0..connections {
        let requests = requests.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await;
            let mut latencies = Vec::new();
            let mut unexpected = 0;
            let mut i = c;
            while Instant::now() < deadline {
                let sent = Instant::now();
                let answer = conn.send(&requests[i % requests.len()]).await;
                latencies.push(sent.elapsed());
                if answer.status != expect {
                    unexpected += 1;
                }
                i += connections;
            }
            (latencies, unexpected)
        }));
    }
    let mut latencies = Vec::new();
    let mut unexpected = 0;
    for t in tasks {
        let (l, u) = t.await.expect("a load task");
        latencies.extend(l);
        unexpected += u;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    Run {
        per_sec: latencies.len() as f64 / elapsed,
        p50_ms: at(0.50),
        p99_ms: at(0.99),
        unexpected,
    }
}

/// The median run of three by requests per second.
pub fn median(mut runs: Vec<Run>) -> Run {
    runs.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
    runs[runs.len() / 2]
}
