//! [`ServerProcess`]: the real built `server` binary as a child process, configured through
//! its environment, with its JSON logs captured. Every wait polls with a deadline and fails
//! naming what it waited for; dropping the value kills the child, so a failing test never
//! leaves a server behind (and prints the server's logs to help read the failure).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixture::{API_TOKEN, ENVIRONMENT};

/// How long a server may take from spawn to answering `/readyz` (a debug build on a busy CI
/// machine, migrations included).
const START_WITHIN: Duration = Duration::from_secs(20);
/// How often waits look again.
const POLL: Duration = Duration::from_millis(20);

/// One running (or exited) server binary.
pub struct ServerProcess {
    name: String,
    child: Child,
    logs: Arc<Mutex<Vec<String>>>,
    readers: Vec<JoinHandle<()>>,
    exit: Option<ExitStatus>,
    /// `http://127.0.0.1:<port>` once [`ServerProcess::start`] returned.
    pub url: String,
    pub addr: SocketAddr,
    /// The working directory (nothing the server writes lands in the source tree).
    _workdir: tempfile::TempDir,
}

impl ServerProcess {
    /// Spawns the binary on `database_url` with port 0, JSON logs, the bootstrap environment
    /// and admin API token, plus `extra` variables, and waits until it answers `/readyz`.
    pub async fn start(name: &str, database_url: &str, extra: &[(&str, &str)]) -> ServerProcess {
        let mut server = Self::spawn(name, database_url, extra);
        server.wait_ready().await;
        server
    }

    /// Spawns without waiting: [`ServerProcess::wait_ready`] is the second half, so several
    /// servers can start at the same moment.
    pub fn spawn(name: &str, database_url: &str, extra: &[(&str, &str)]) -> ServerProcess {
        let workdir = tempfile::tempdir().expect("a working directory for the server");
        let mut command = Command::new(env!("CARGO_BIN_EXE_server"));
        // Nothing inherited (a DATABASE_URL or RUST_LOG of the developer's shell) changes
        // what is tested.
        command
            .env_clear()
            .current_dir(workdir.path())
            .env("DATABASE_URL", database_url)
            .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
            .env("VF_LOG_FORMAT", "json")
            .env("RUST_LOG", "info,sqlx=warn,tower_http=warn")
            .env("VF_BOOTSTRAP_ENVIRONMENT", ENVIRONMENT)
            .env("VF_BOOTSTRAP_API_TOKEN", API_TOKEN)
            // These scenarios' nodes report when the test makes them, not on a poll interval:
            // their releases wait for them, as `Config::for_tests` does (a test may override).
            .env("VF_OFFLINE_NODES_DEFAULT", "wait")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in extra {
            command.env(k, v);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot spawn the server binary: {e}"));
        let logs = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            read_lines(child.stdout.take().expect("piped stdout"), logs.clone()),
            read_lines(child.stderr.take().expect("piped stderr"), logs.clone()),
        ];
        ServerProcess {
            name: name.to_string(),
            child,
            logs,
            readers,
            exit: None,
            url: String::new(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            _workdir: workdir,
        }
    }

    /// Waits for the `listening` log line (the bound address) and a 200 from `/readyz`.
    pub async fn wait_ready(&mut self) {
        let started = Instant::now();
        let listening = self.wait_for_log("listening", START_WITHIN).await;
        let addr = listening["addr"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: `listening` without an addr: {listening}", self.name));
        self.addr = addr
            .parse()
            .unwrap_or_else(|e| panic!("{}: bad listening addr {addr:?}: {e}", self.name));
        self.url = format!("http://{addr}");
        let client = reqwest::Client::new();
        loop {
            let ready = client
                .get(format!("{}/readyz", self.url))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return;
            }
            self.fail_if_exited("answering /readyz");
            assert!(
                started.elapsed() < START_WITHIN,
                "{}: /readyz did not answer 200 within {START_WITHIN:?}",
                self.name
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Calls a server function (`POST /api/<endpoint>`) as the admin API token; the answer
    /// must be a 200 with JSON.
    pub async fn call(&self, endpoint: &str, body: Value) -> Value {
        let resp = reqwest::Client::new()
            .post(format!("{}/api/{endpoint}", self.url))
            .bearer_auth(API_TOKEN)
            .json(&body)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {endpoint}: {e}", self.name));
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        assert_eq!(status, 200, "{}: {endpoint}: {text}", self.name);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: {endpoint}: not JSON ({e}): {text}", self.name))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9`: no shutdown code runs. Returns once the process is gone.
    pub async fn kill(&mut self) -> ExitStatus {
        self.child
            .kill()
            .unwrap_or_else(|e| panic!("{}: SIGKILL failed: {e}", self.name));
        self.wait_exit(Duration::from_secs(5)).await
    }

    /// Sends SIGTERM (what an orchestrator sends to stop a replica) and returns at once.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .unwrap_or_else(|e| panic!("{}: cannot run kill -TERM: {e}", self.name));
        assert!(
            status.success(),
            "{}: kill -TERM failed: {status}",
            self.name
        );
    }

    /// SIGTERM, then the exit status, which must be success.
    pub async fn stop(&mut self) {
        self.terminate();
        let status = self.wait_exit(Duration::from_secs(10)).await;
        assert!(
            status.success(),
            "{}: exited with {status} after SIGTERM",
            self.name
        );
    }

    /// Waits for the process to exit (and its log pipes to drain).
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.try_exit() {
                break status;
            }
            assert!(
                started.elapsed() < within,
                "{}: still running {within:?} after it was asked to stop",
                self.name
            );
            tokio::time::sleep(POLL).await;
        };
        // The pipes close with the process; the readers then end.
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        status
    }

    fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self
                .child
                .try_wait()
                .unwrap_or_else(|e| panic!("{}: cannot wait for the process: {e}", self.name));
        }
        self.exit
    }

    fn fail_if_exited(&mut self, while_doing: &str) {
        if let Some(status) = self.try_exit() {
            panic!("{}: exited with {status} before {while_doing}", self.name);
        }
    }

    /// Every line logged so far, stdout and stderr interleaved as read.
    pub fn log_lines(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// The log lines that are JSON objects (all of them, with `VF_LOG_FORMAT=json`).
    pub fn json_logs(&self) -> Vec<Value> {
        self.log_lines()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect()
    }

    /// The log events whose `message` is `message`.
    pub fn events(&self, message: &str) -> Vec<Value> {
        self.json_logs()
            .into_iter()
            .filter(|e| e["message"] == message)
            .collect()
    }

    /// Waits until an event with `message` is logged and returns it.
    pub async fn wait_for_log(&mut self, message: &str, within: Duration) -> Value {
        let started = Instant::now();
        loop {
            if let Some(event) = self.events(message).into_iter().next() {
                return event;
            }
            self.fail_if_exited(&format!("logging {message:?}"));
            assert!(
                started.elapsed() < within,
                "{}: no {message:?} in the log within {within:?}",
                self.name
            );
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- logs of {} (pid {}) ---", self.name, self.child.id());
            for line in self.log_lines() {
                eprintln!("{line}");
            }
            eprintln!("--- end of logs of {} ---", self.name);
        }
    }
}

/// Copies `pipe` line by line into `logs` until it closes.
fn read_lines(pipe: impl Read + Send + 'static, logs: Arc<Mutex<Vec<String>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let text = String::from_utf8_lossy(&line).trim_end().to_string();
            logs.lock().unwrap().push(text);
            line.clear();
        }
    })
}

/// Runs `vf-audit-verify` on `database_url`: its exit status and stdout.
pub fn verify_audit_chain(database_url: &str) -> (ExitStatus, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vf-audit-verify"))
        .env_clear()
        .env("DATABASE_URL", database_url)
        .output()
        .expect("run vf-audit-verify");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, text)
}

/// Asserts the audit log of `database_url` verifies end to end.
pub fn assert_audit_chain_ok(database_url: &str) {
    let (status, text) = verify_audit_chain(database_url);
    assert!(status.success(), "vf-audit-verify exited {status}: {text}");
    assert!(
        text.contains("audit chain OK"),
        "vf-audit-verify said: {text}"
    );
}
