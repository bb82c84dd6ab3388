//! The shape every server process of the kit shares (PostgreSQL, PgBouncer, `redis-server`):
//! a temporary directory, a child process signalled only by its own PID, a bounded wait until
//! it is ready, a bounded stop, and starting — on fresh ports when it first starts (a port
//! found free can be taken before the child binds it), and again on its own port after a stop
//! (the port was only just freed). Each server brings only its command line and its readiness
//! probe.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::signal;

/// Fresh ports tried by a first start when the child exits early.
pub(crate) const START_ATTEMPTS: u32 = 5;
/// Attempts by a restart to re-bind the same port.
pub(crate) const RESTART_ATTEMPTS: u32 = 5;
/// Pause between re-bind attempts, multiplied by the attempt number.
pub(crate) const RESTART_BACKOFF: Duration = Duration::from_millis(200);
/// Lines returned by [`Process::log_tail`].
pub(crate) const LOG_TAIL_LINES: usize = 40;

/// How one launch of a server process ended.
pub(crate) enum Launch {
    /// It accepts connections.
    Ready,
    /// It exited before it did.
    Exited(ExitStatus),
}

/// The bounds of one server's waits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// How long a spawned process may take to become ready.
    pub(crate) ready: Duration,
    /// How long a signalled process may take to exit before it is killed outright.
    pub(crate) stop: Duration,
    /// The pause between two checks of a wait.
    pub(crate) poll: Duration,
    /// Hard cap on the checks of one wait, whatever the clock says.
    pub(crate) max_polls: u32,
}

/// Polls `child` until it exits, at most `timeout` and `timing.max_polls` checks:
/// `Ok(None)` when it is still running then.
///
/// # Errors
/// When its state cannot be read.
pub(crate) fn wait_exit(
    child: &mut Child,
    timeout: Duration,
    timing: Timing,
) -> io::Result<Option<ExitStatus>> {
    let started = Instant::now();
    for _ in 0..timing.max_polls {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if started.elapsed() > timeout {
            break;
        }
        thread::sleep(timing.poll);
    }
    Ok(None)
}

/// One server process and the temporary directory it lives in (deleted when this is dropped).
#[derive(Debug)]
pub(crate) struct Process {
    /// What messages call it: `postgres`, `pgbouncer`, `redis-server`.
    name: &'static str,
    /// The log file in the directory, for [`log_tail`](Self::log_tail).
    log_file: &'static str,
    timing: Timing,
    /// What [`stop`](Self::stop) sends first, waiting `timing.stop` for an exit before
    /// `SIGKILL`; `None`: `SIGKILL` at once.
    stop_signal: Option<Signal>,
    child: Mutex<Option<Child>>,
    dir: TempDir,
}

impl Process {
    /// A process not started yet, in `dir`.
    pub(crate) fn new(
        name: &'static str,
        log_file: &'static str,
        timing: Timing,
        stop_signal: Option<Signal>,
        dir: TempDir,
    ) -> Self {
        Self {
            name,
            log_file,
            timing,
            stop_signal,
            child: Mutex::new(None),
            dir,
        }
    }

    /// The temporary directory.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `file` in the directory, opened to append the child's output to.
    pub(crate) fn append(&self, file: &str) -> io::Result<File> {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(file))
    }

    /// The child, if one was launched and not stopped since.
    pub(crate) fn child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The PID of the process, or `None` if it is stopped or has exited.
    pub(crate) fn pid(&self) -> Option<u32> {
        let mut guard = self.child();
        let child = guard.as_mut()?;
        signal::is_alive(child).then(|| child.id())
    }

    /// Whether the process is alive.
    pub(crate) fn is_running(&self) -> bool {
        self.pid().is_some()
    }

    /// Stops the process the server's way (see [`stop_with`](Self::stop_with)).
    pub(crate) fn stop(&mut self) {
        self.stop_with(self.stop_signal);
    }

    /// Sends `how` to the process by its PID and waits (bounded) for it to exit, then
    /// `SIGKILL`s and reaps it; `None`: `SIGKILL` at once. Does nothing if it is stopped.
    pub(crate) fn stop_with(&mut self, how: Option<Signal>) {
        let child = self
            .child
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut child) = child else { return };
        if let Some(how) = how
            && signal::signal_child(&mut child, how).is_ok()
        {
            let _ = wait_exit(&mut child, self.timing.stop, self.timing);
        }
        signal::kill_and_reap(&mut child);
    }

    /// Keeps `child` (just spawned to listen on `port`) as the process and polls until
    /// `ready(child)` says it is, or it exits, or `timing.ready` runs out.
    ///
    /// # Errors
    /// When the time runs out ([`io::ErrorKind::TimedOut`]) or the child's state cannot be
    /// read; the process is stopped then. The caller adds its log to the message.
    pub(crate) fn launch(
        &mut self,
        child: Child,
        port: u16,
        mut ready: impl FnMut(&mut Child) -> io::Result<bool>,
    ) -> io::Result<Launch> {
        let (name, timing) = (self.name, self.timing);
        let slot = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        debug_assert!(slot.is_none(), "launch over a live child");
        let child = slot.insert(child);
        let pid = child.id();
        let started = Instant::now();
        let mut polled = || -> io::Result<Option<Launch>> {
            for _ in 0..timing.max_polls {
                if let Some(status) = child.try_wait()? {
                    return Ok(Some(Launch::Exited(status)));
                }
                if started.elapsed() > timing.ready {
                    break;
                }
                if ready(child)? {
                    return Ok(Some(Launch::Ready));
                }
                thread::sleep(timing.poll);
            }
            Ok(None)
        };
        match polled() {
            Ok(Some(Launch::Ready)) => Ok(Launch::Ready),
            Ok(Some(exited)) => {
                self.stop_with(None); // already reaped; just forget it
                Ok(exited)
            }
            Ok(None) => {
                self.stop();
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{name} (pid {pid}) was not ready on port {port} within {:?}",
                        timing.ready
                    ),
                ))
            }
            Err(err) => {
                self.stop();
                Err(err)
            }
        }
    }

    /// The last ~40 lines of the log, for panic and error messages.
    pub(crate) fn log_tail(&self) -> String {
        let path = self.dir.path().join(self.log_file);
        match fs::read(&path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let lines: Vec<&str> = text.lines().collect();
                let from = lines.len().saturating_sub(LOG_TAIL_LINES);
                lines[from..].join("\n")
            }
            Err(err) => format!("(no log at {}: {err})", path.display()),
        }
    }

    /// `what`, followed by the tail of the log.
    pub(crate) fn failure(&self, what: &str) -> io::Error {
        io::Error::other(format!(
            "{what}\n--- {} (last {LOG_TAIL_LINES} lines) ---\n{}",
            self.dir.path().join(self.log_file).display(),
            self.log_tail()
        ))
    }
}

/// A server of the kit, as [`start_on_fresh_ports`] and [`start_again`] drive it.
pub(crate) trait Server {
    /// Its process.
    fn process(&self) -> &Process;

    /// The port it listens on.
    fn port(&self) -> u16;

    /// Takes fresh ports for a first start (and writes whatever names them, such as a
    /// configuration file).
    ///
    /// # Errors
    /// When no port is free or the file cannot be written.
    fn take_ports(&mut self) -> io::Result<()>;

    /// Spawns the process on its port and waits until it is ready or exits
    /// ([`Process::launch`] with the server's command and probe).
    ///
    /// # Errors
    /// When spawning fails, it does not become ready in time, or another try cannot help.
    fn launch(&mut self) -> io::Result<Launch>;

    /// `what`, with what the server logged.
    fn failure(&self, what: &str) -> io::Error {
        self.process().failure(what)
    }
}

/// Starts `server` on fresh ports, at most [`START_ATTEMPTS`] times while it exits before it
/// is ready (typically because another process took the port).
///
/// # Errors
/// As [`Server::launch`], or when no try was ready (the message lists the exits).
pub(crate) fn start_on_fresh_ports(server: &mut impl Server) -> io::Result<()> {
    let started = until_ready(START_ATTEMPTS, Duration::ZERO, |_| {
        server.take_ports()?;
        Ok((server.launch()?, format!("port {} -> ", server.port())))
    })?;
    started.map_err(|exits| {
        server.failure(&format!(
            "{} exited before becoming ready on {START_ATTEMPTS} fresh ports:{exits}",
            server.process().name
        ))
    })
}

/// Starts `server` again after a stop, on the same port; re-binding is tried
/// [`RESTART_ATTEMPTS`] times with a short backoff, since the port was only just freed.
///
/// # Errors
/// [`io::ErrorKind::AlreadyExists`] if it is still running; as [`Server::launch`]; or when no
/// try was ready (the message lists the exits).
pub(crate) fn start_again(server: &mut impl Server) -> io::Result<()> {
    let (name, port) = (server.process().name, server.port());
    if server.process().is_running() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{name} on port {port} is still running; stop() it first"),
        ));
    }
    let restarted = until_ready(RESTART_ATTEMPTS, RESTART_BACKOFF, |_| {
        Ok((server.launch()?, String::new()))
    })?;
    restarted.map_err(|exits| {
        server.failure(&format!(
            "{name} could not start again on port {port} after {RESTART_ATTEMPTS} attempts:{exits}"
        ))
    })
}

/// Calls `launch(attempt)` until it answers [`Launch::Ready`], at most `attempts` times,
/// sleeping `backoff` × the attempt number between tries. `launch` also names its try for the
/// log (`"port 6390 -> "`, or nothing).
///
/// `Ok(Err(log))` when no try was ready: one line per exit, for the caller's error message.
///
/// # Errors
/// Whatever `launch` returns, at once (spawning failed, or the server rejected its
/// configuration and trying again cannot help).
fn until_ready(
    attempts: u32,
    backoff: Duration,
    mut launch: impl FnMut(u32) -> io::Result<(Launch, String)>,
) -> io::Result<Result<(), String>> {
    let mut exits = String::new();
    for attempt in 1..=attempts {
        match launch(attempt)? {
            (Launch::Ready, _) => return Ok(Ok(())),
            (Launch::Exited(status), label) => {
                let _ = write!(exits, "\n  attempt {attempt}: {label}{status}");
                if attempt < attempts && !backoff.is_zero() {
                    thread::sleep(backoff * attempt);
                }
            }
        }
    }
    Ok(Err(exits))
}
