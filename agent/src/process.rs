//! One pipeline's child process: started through `sh -c` in its own process group so stopping
//! it reaches everything the command spawned (SIGTERM, then SIGKILL after a grace period).

use std::{
    collections::VecDeque,
    path::Path,
    process::{ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    process::Command,
    sync::watch,
};

/// Lines of stdout/stderr kept for crash reports.
const OUTPUT_LINES: usize = 20;
/// Lines of stdout/stderr waiting to be shipped, at most (the oldest go first).
const UNSHIPPED_LINES: usize = 1_000;

/// What the command printed: the last lines for crash reports, and the lines not shipped to
/// the server yet.
#[derive(Debug, Default)]
struct Output {
    recent: VecDeque<String>,
    unshipped: VecDeque<String>,
}

impl Output {
    fn push(&mut self, line: String) {
        for (lines, bound) in [
            (&mut self.recent, OUTPUT_LINES),
            (&mut self.unshipped, UNSHIPPED_LINES),
        ] {
            if lines.len() == bound {
                lines.pop_front();
            }
            lines.push_back(line.clone());
        }
    }
}
/// How long to wait after SIGKILL before giving up on reaping the process.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How long an exit waits for the command's last output lines (a child it left behind may hold
/// the pipes open, so this is bounded).
const OUTPUT_DRAIN: Duration = Duration::from_millis(200);

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    Unknown,
}

impl Exit {
    fn from_status(status: ExitStatus) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            if let Some(signal) = status.signal() {
                return Exit::Signal(signal);
            }
        }
        status.code().map_or(Exit::Unknown, Exit::Code)
    }

    /// Exit code 0: the command finished on its own rather than failing.
    pub fn is_success(self) -> bool {
        self == Exit::Code(0)
    }

    /// The line reported in `recentLogs`.
    pub fn describe(self) -> String {
        match self {
            Exit::Code(code) => format!("process exited with code {code}"),
            Exit::Signal(signal) => format!("process killed by signal {signal}"),
            Exit::Unknown => "process exited with an unknown status".to_string(),
        }
    }

    /// `code 1`, `signal 9`: the exit inside a crash reason.
    pub fn summary(self) -> String {
        match self {
            Exit::Code(code) => format!("code {code}"),
            Exit::Signal(signal) => format!("signal {signal}"),
            Exit::Unknown => "unknown status".to_string(),
        }
    }
}

/// Replaces `{config}` in the command template by the (shell-quoted when needed) config path.
pub fn render_command(template: &str, config_path: &Path) -> String {
    template.replace("{config}", &shell_quote(&config_path.to_string_lossy()))
}

fn shell_quote(raw: &str) -> String {
    let plain = !raw.is_empty()
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | ':'));
    if plain {
        raw.to_string()
    } else {
        format!("'{}'", raw.replace('\'', r"'\''"))
    }
}

/// A running (or exited) pipeline command.
#[derive(Debug)]
pub struct PipelineProcess {
    pid: Option<u32>,
    started: Instant,
    exit: watch::Receiver<Option<Exit>>,
    output: Arc<Mutex<Output>>,
}

impl PipelineProcess {
    /// Starts `template` (with `{config}` filled in) under `sh -c`.
    pub fn spawn(
        template: &str,
        config_path: &Path,
        pipeline_id: &str,
        log_level: Option<&str>,
    ) -> std::io::Result<Self> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(render_command(template, config_path))
            .env("VF_PIPELINE_ID", pipeline_id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(level) = log_level {
            command.env("VECTOR_LOG", level);
        }
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn()?;
        let output = Arc::new(Mutex::new(Output::default()));
        let mut readers = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            readers.push(collect_output(
                stdout,
                output.clone(),
                pipeline_id.to_string(),
            ));
        }
        if let Some(stderr) = child.stderr.take() {
            readers.push(collect_output(
                stderr,
                output.clone(),
                pipeline_id.to_string(),
            ));
        }
        let pid = child.id();
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let exit = child.wait().await.map_or(Exit::Unknown, Exit::from_status);
            // So whoever sees the exit also sees the last line printed before it.
            let _ = tokio::time::timeout(OUTPUT_DRAIN, futures::future::join_all(readers)).await;
            let _ = exit_tx.send(Some(exit));
        });
        Ok(PipelineProcess {
            pid,
            started: Instant::now(),
            exit,
            output,
        })
    }

    /// The process id while the process is alive.
    pub fn pid(&self) -> Option<u32> {
        self.exit().is_none().then_some(self.pid).flatten()
    }

    /// `Some` once the process has ended.
    pub fn exit(&self) -> Option<Exit> {
        *self.exit.borrow()
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// When the process was started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The last lines the command printed.
    pub fn recent_output(&self) -> Vec<String> {
        lock(&self.output).recent.iter().cloned().collect()
    }

    /// The lines printed since the last call (at most the newest 1,000).
    pub fn take_unshipped(&self) -> Vec<String> {
        lock(&self.output).unshipped.drain(..).collect()
    }

    /// Resolves when the process ends.
    pub async fn wait_exit(&self) -> Exit {
        let mut exit = self.exit.clone();
        let ended = exit.wait_for(Option::is_some).await.map(|e| *e);
        ended.ok().flatten().unwrap_or(Exit::Unknown)
    }

    /// SIGTERM to the process group, SIGKILL after `grace`, then wait for the exit.
    pub async fn stop(self, grace: Duration) {
        if self.exit().is_none() {
            self.signal(Signal::Term);
            if tokio::time::timeout(grace, self.wait_exit()).await.is_err() {
                tracing::warn!(pid = ?self.pid, "pipeline process ignored SIGTERM; killing it");
                self.signal(Signal::Kill);
                let _ = tokio::time::timeout(KILL_WAIT, self.wait_exit()).await;
            }
        }
        // Mop up anything the command left behind in its group.
        self.signal(Signal::Kill);
    }

    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid {
            signal_group(pid, signal);
        }
    }
}

impl Drop for PipelineProcess {
    fn drop(&mut self) {
        if self.exit().is_none() {
            self.signal(Signal::Kill);
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

#[cfg(unix)]
fn signal_group(pid: u32, signal: Signal) {
    use nix::sys::signal::{killpg, Signal as Nix};
    let Ok(pid) = i32::try_from(pid) else { return };
    let signal = match signal {
        Signal::Term => Nix::SIGTERM,
        Signal::Kill => Nix::SIGKILL,
    };
    // ESRCH (already gone) is the expected outcome of a mop-up.
    let _ = killpg(nix::unistd::Pid::from_raw(pid), signal);
}

#[cfg(not(unix))]
fn signal_group(_pid: u32, _signal: Signal) {
    // Without process groups the child is killed when its handle drops (`kill_on_drop`).
}

fn collect_output(
    stream: impl AsyncRead + Unpin + Send + 'static,
    output: Arc<Mutex<Output>>,
    pipeline_id: String,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(pipeline_id = %pipeline_id, "{line}");
            lock(&output).push(line);
        }
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_placeholder_is_replaced_by_the_path() {
        let rendered = render_command("vector --config {config}", Path::new("/d/p1.yaml"));
        assert_eq!(rendered, "vector --config /d/p1.yaml");
    }

    #[test]
    fn path_with_spaces_or_quotes_is_shell_quoted() {
        let rendered = render_command("cat {config}", Path::new("/my dir/it's.yaml"));
        assert_eq!(rendered, r"cat '/my dir/it'\''s.yaml'");
    }

    #[test]
    fn output_keeps_the_last_lines_for_crashes_and_the_unshipped_ones_bounded() {
        let mut output = Output::default();
        for i in 0..(UNSHIPPED_LINES + 5) {
            output.push(format!("line {i}"));
        }
        assert_eq!(output.recent.len(), OUTPUT_LINES);
        assert_eq!(output.unshipped.len(), UNSHIPPED_LINES);
        assert_eq!(output.unshipped.front().map(String::as_str), Some("line 5"));
        assert_eq!(output.recent.back(), output.unshipped.back());
    }

    #[test]
    fn exit_descriptions_name_the_code_or_signal() {
        assert_eq!(Exit::Code(3).describe(), "process exited with code 3");
        assert_eq!(Exit::Signal(9).describe(), "process killed by signal 9");
        assert!(Exit::Code(0).is_success() && !Exit::Code(3).is_success());
        assert_eq!(Exit::Code(3).summary(), "code 3");
        assert_eq!(Exit::Signal(9).summary(), "signal 9");
    }
}
