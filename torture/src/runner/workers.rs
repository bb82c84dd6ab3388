//! The worker processes: spawned from the torture binary, signalled by their own PIDs only.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::worker::WorkerConfig;

/// Poll interval while waiting for workers to exit.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// One worker process.
#[derive(Debug)]
struct Worker {
    child: Child,
    stderr: PathBuf,
    /// Set while it is `SIGSTOP`ped, so that it is continued before being waited for.
    stopped: bool,
}

/// The run's worker processes. Dropping this kills (by PID) and reaps any still running.
#[derive(Debug, Default)]
pub(crate) struct Workers {
    workers: Vec<Worker>,
}

/// How a worker ended.
#[derive(Debug)]
pub(crate) struct Exit {
    pub(crate) index: usize,
    /// `None` if it had to be killed.
    pub(crate) status: Option<ExitStatus>,
    /// The end of what it wrote on stderr.
    pub(crate) stderr_tail: String,
}

impl Workers {
    /// Spawns `exe worker --config <dir>/worker-N.json` for each config, with `env` added to
    /// its environment (a libfaketime clock's).
    pub(crate) fn spawn(
        exe: &Path,
        dir: &Path,
        configs: &[WorkerConfig],
        env: &[(OsString, OsString)],
    ) -> io::Result<Workers> {
        let mut workers = Workers::default();
        for config in configs {
            let config_path = dir.join(format!("worker-{}.json", config.index));
            std::fs::write(&config_path, serde_json::to_vec_pretty(config)?)?;
            let stderr = dir.join(format!("worker-{}.stderr", config.index));
            let child = Command::new(exe)
                .arg("worker")
                .arg("--config")
                .arg(&config_path)
                .envs(env.iter().cloned())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(File::create(&stderr)?)
                .spawn()
                .map_err(|e| {
                    io::Error::new(e.kind(), format!("spawning {}: {e}", exe.display()))
                })?;
            workers.workers.push(Worker {
                child,
                stderr,
                stopped: false,
            });
        }
        Ok(workers)
    }

    /// `SIGSTOP`s worker `index`.
    pub(crate) fn pause(&mut self, index: usize) -> io::Result<()> {
        self.signal(index, Signal::SIGSTOP)?;
        if let Some(w) = self.workers.get_mut(index) {
            w.stopped = true;
        }
        Ok(())
    }

    /// `SIGCONT`s worker `index`.
    pub(crate) fn resume(&mut self, index: usize) -> io::Result<()> {
        self.signal(index, Signal::SIGCONT)?;
        if let Some(w) = self.workers.get_mut(index) {
            w.stopped = false;
        }
        Ok(())
    }

    /// Waits until every worker exits, at most until `limit`; those still running then are
    /// killed. Stopped workers are continued first.
    pub(crate) fn wait(&mut self, limit: Instant) -> Vec<Exit> {
        for index in 0..self.workers.len() {
            if self.workers[index].stopped {
                let _ = self.resume(index);
            }
        }
        let mut exits = Vec::new();
        for (index, worker) in self.workers.iter_mut().enumerate() {
            let mut status = None;
            for _ in 0..100_000 {
                match worker.child.try_wait() {
                    Ok(Some(s)) => {
                        status = Some(s);
                        break;
                    }
                    Ok(None) if Instant::now() < limit => thread::sleep(EXIT_POLL),
                    _ => break,
                }
            }
            if status.is_none() {
                // Child::kill sends SIGKILL to this child's own PID.
                let _ = worker.child.kill();
                let _ = worker.child.wait();
            }
            exits.push(Exit {
                index,
                status,
                stderr_tail: tail(&worker.stderr),
            });
        }
        exits
    }

    fn signal(&mut self, index: usize, signal: Signal) -> io::Result<()> {
        let worker = self.workers.get_mut(index).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("no worker {index}"))
        })?;
        // Only a child that has not been reaped: its PID cannot have been reused.
        if worker.child.try_wait()?.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("worker {index} has exited"),
            ));
        }
        let pid = i32::try_from(worker.child.id())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "pid out of range"))?;
        kill(Pid::from_raw(pid), signal).map_err(io::Error::from)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            if let Ok(None) = worker.child.try_wait() {
                let _ = worker.child.kill();
                let _ = worker.child.wait();
            }
        }
    }
}

/// The last ~20 lines of a file.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
