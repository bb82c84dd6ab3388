//! Work run in another OS process: S5 and S9 (a process holding the leases, so its memory is
//! its own) and S10 (several processes contending, each with its own `Locker` and connections).
//!
//! The parent starts this same binary with the hidden `--child ROLE`, the Redis URL and the
//! role's parameters as JSON. The child talks to the parent in lines: on stdout, any lines the
//! role needs (S10's `ready`) and last its report, one line of JSON; on stdin, the lines the
//! parent sends (S10's start of the window). Its stderr is kept for the parent's errors.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What a child process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Role {
    /// S5 and S9: take leases, hold them while they are renewed, report ([`crate::renewal`]).
    Renewal,
    /// S10: one of the contending processes ([`crate::fairness`]).
    Fairness,
}

impl Role {
    fn as_arg(self) -> &'static str {
        match self {
            Self::Renewal => "renewal",
            Self::Fairness => "fairness",
        }
    }
}

/// A child process, seen from the parent. Killed if dropped while it runs.
pub(crate) struct Child {
    /// What it is, for errors: `the S5 child`.
    what: String,
    process: std::process::Child,
    stdin: Option<ChildStdin>,
    /// Its stdout, line by line (read by a thread of its own, so a wait can time out).
    lines: mpsc::Receiver<String>,
    /// Its stderr, whole, once it ends.
    stderr: Option<JoinHandle<String>>,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child")
            .field("what", &self.what)
            .field("pid", &self.process.id())
            .finish_non_exhaustive()
    }
}

impl Child {
    /// Starts `role` against `url` on a tokio runtime of flavour `runtime`, with `params`.
    pub(crate) fn spawn(
        role: Role,
        what: &str,
        url: &str,
        runtime: &str,
        params: &impl Serialize,
    ) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let mut process = Command::new(exe)
            .args([
                "--child",
                role.as_arg(),
                "--child-url",
                url,
                "--runtime",
                runtime,
            ])
            .arg("--child-params")
            .arg(serde_json::to_string(params).map_err(|e| e.to_string())?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        let (sender, lines) = mpsc::channel();
        if let Some(stdout) = process.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = process.stderr.take().map(|mut stderr| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text);
                text
            })
        });
        Ok(Self {
            what: what.to_owned(),
            stdin: process.stdin.take(),
            process,
            lines,
            stderr,
        })
    }

    /// The child's next line on stdout, waiting at most `within`.
    pub(crate) fn line(&mut self, within: Duration) -> Result<String, String> {
        self.lines.recv_timeout(within).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => {
                format!("{} said nothing within {within:?}", self.what)
            }
            mpsc::RecvTimeoutError::Disconnected => self.failure("ended early"),
        })
    }

    /// Sends the child one line on its stdin.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), String> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{}: stdin is closed", self.what))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to {}: {e}", self.what))
    }

    /// Waits until `deadline` for the child to end, then parses its last line on stdout as its
    /// report. A child still running at the deadline is killed.
    pub(crate) fn report<R: DeserializeOwned>(mut self, deadline: Instant) -> Result<R, String> {
        self.stdin = None;
        loop {
            match self.process.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) => {
                    let _ = self.process.kill();
                    let _ = self.process.wait();
                    return Err(format!("{} ran past its time; killed", self.what));
                }
                Err(e) => return Err(format!("waiting for {}: {e}", self.what)),
            }
        }
        let status = self.process.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(self.failure(&format!("failed ({status})")));
        }
        // The reading thread ends with stdout; everything it read is in the channel.
        let last = std::iter::from_fn(|| self.lines.recv_timeout(Duration::from_secs(5)).ok())
            .filter(|l| !l.trim().is_empty())
            .last()
            .unwrap_or_default();
        serde_json::from_str(last.trim()).map_err(|e| {
            format!(
                "the report of {} does not parse ({e}): {}",
                self.what,
                last.trim()
            )
        })
    }

    /// `the S5 child failed (...): <its stderr>`, once it has ended.
    fn failure(&mut self, how: &str) -> String {
        let _ = self.process.wait();
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        format!("{} {how}: {}", self.what, stderr.trim())
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if matches!(self.process.try_wait(), Ok(None)) {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

/// In a child: one line to the parent, on stdout.
pub(crate) fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// In a child: the parent's next line on stdin (an error if the parent closed it).
pub(crate) async fn hear() -> Result<String, String> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) => Err("the parent closed stdin".to_owned()),
            Ok(_) => Ok(line.trim().to_owned()),
            Err(e) => Err(format!("reading stdin: {e}")),
        }
    })
    .await
    .map_err(|e| e.to_string())?
}
