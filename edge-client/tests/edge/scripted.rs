//! An upstream that fails in ways the real server does not (garbage, errors, silence), one
//! scripted answer per connection, each connection closed after its answer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub enum Reply {
    /// `200 OK` with this body and an ETag.
    Document(String),
    /// This status, empty body.
    Status(u16),
    /// Reads the request and never answers.
    Silence,
}

/// Serves `replies` in order, one per connection; the last one repeats.
pub struct Scripted {
    pub url: String,
    task: JoinHandle<()>,
}

impl Scripted {
    pub async fn start(replies: Vec<Reply>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api/edge-config", listener.local_addr().unwrap());
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let reply = {
                    let mut queue = replies.lock().unwrap();
                    if queue.len() > 1 {
                        queue.pop_front()
                    } else {
                        queue.front().map(Reply::again)
                    }
                };
                if let Some(reply) = reply {
                    tokio::spawn(answer(stream, reply));
                }
            }
        });
        Scripted { url, task }
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Reply {
    fn again(&self) -> Reply {
        match self {
            Reply::Document(body) => Reply::Document(body.clone()),
            Reply::Status(code) => Reply::Status(*code),
            Reply::Silence => Reply::Silence,
        }
    }
}

async fn answer(mut stream: TcpStream, reply: Reply) {
    let mut request = Vec::new();
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
        }
    }
    let response = match reply {
        Reply::Document(body) => format!(
            "HTTP/1.1 200 OK\r\nETag: \"scripted\"\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        Reply::Status(code) => {
            format!("HTTP/1.1 {code} Scripted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
        Reply::Silence => {
            // Hold the connection open until the client gives up.
            let _ = stream.read(&mut chunk).await;
            return;
        }
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
