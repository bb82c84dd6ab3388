//! The worker processes: starting them, reading their output, reaping them, and killing any
//! that overruns.

use std::io::{self, BufRead as _, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use crate::Error;
use crate::cli::WorkerArgs;
use crate::progress::Progress;
use crate::slot::{KillReason, Slot};

/// How often the supervisor wakes up without news, to reap, check the clock and redraw.
const TICK: Duration = Duration::from_millis(100);

/// Messages taken at once before the supervisor looks at the clock again.
const MAX_BATCH: usize = 10_000;

/// How long after killing workers the supervisor still reads what they wrote.
const DRAIN: Duration = Duration::from_secs(2);

/// Which output stream of a worker a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// Protocol lines.
    Stdout,
    /// Anything else (a panic message, say).
    Stderr,
}

/// What the reader threads send to the supervisor.
#[derive(Debug)]
enum Msg {
    /// A line of output.
    Line {
        /// The worker's slot.
        worker: usize,
        /// Where it came from.
        stream: Stream,
        /// The line, without its end.
        line: String,
    },
    /// A stream reached its end (or failed).
    Closed {
        /// The worker's slot.
        worker: usize,
    },
}

/// The worker processes of a run. Dropping it kills (by PID) and reaps any still running, so no
/// early return leaves a worker behind.
#[derive(Debug)]
pub(crate) struct Fleet {
    slots: Vec<Slot>,
    rx: Receiver<Msg>,
}

impl Fleet {
    /// Starts one process of this executable per element of `workers`, with stdout and stderr
    /// piped to reader threads.
    ///
    /// # Errors
    /// If the executable cannot be found or a process or thread cannot be started; the workers
    /// started so far are killed.
    pub(crate) fn spawn(workers: &[WorkerArgs]) -> Result<Self, Error> {
        let exe = std::env::current_exe()?;
        let (tx, rx) = mpsc::channel();
        let mut fleet = Self {
            slots: Vec::with_capacity(workers.len()),
            rx,
        };
        for args in workers {
            let mut child = Command::new(&exe)
                .args(args.to_command_line())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start worker {}: {e}", args.index))?;
            let worker = fleet.slots.len();
            let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
            fleet.slots.push(Slot::new(args.index, child));
            let slot = &mut fleet.slots[worker]; // just pushed
            if let Some(stdout) = stdout {
                forward(worker, Stream::Stdout, stdout, tx.clone())?;
                slot.stream_opened();
            }
            if let Some(stderr) = stderr {
                forward(worker, Stream::Stderr, stderr, tx.clone())?;
                slot.stream_opened();
            }
        }
        Ok(fleet)
    }

    /// The workers, in the order they were started.
    pub(crate) fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// Follows the workers until all have ended and their output is read. Workers still
    /// running `grace` after `deadline`, or all of them once `interrupted` is set, are killed.
    pub(crate) fn supervise(
        &mut self,
        deadline: Instant,
        grace: Duration,
        interrupted: &AtomicBool,
        progress: &mut Progress,
    ) {
        let kill_at = deadline + grace;
        let mut drain_until = None;
        loop {
            match self.rx.recv_timeout(TICK) {
                Ok(msg) => {
                    self.handle(msg, progress);
                    // Bounded, so a flood of output cannot hold off the clock checks below.
                    let batch: Vec<Msg> = self.rx.try_iter().take(MAX_BATCH).collect();
                    for msg in batch {
                        self.handle(msg, progress);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // Every reader is done; only exits are left to wait for.
                Err(RecvTimeoutError::Disconnected) => thread::sleep(TICK),
            }
            for slot in &mut self.slots {
                slot.reap();
            }
            progress.update(&self.slots);
            if self.slots.iter().all(Slot::finished) {
                return;
            }
            let now = Instant::now();
            match drain_until {
                Some(until) if now >= until => return,
                Some(_) => {}
                None => {
                    let reason = if interrupted.load(Ordering::Relaxed) {
                        Some(KillReason::Interrupted)
                    } else if now >= kill_at {
                        Some(KillReason::Overran)
                    } else {
                        None
                    };
                    if let Some(reason) = reason {
                        for slot in &mut self.slots {
                            slot.kill(reason);
                        }
                        drain_until = Some(now + DRAIN);
                    }
                }
            }
        }
    }

    /// Takes one message from a reader thread into account.
    fn handle(&mut self, msg: Msg, progress: &Progress) {
        match msg {
            Msg::Line {
                worker,
                stream,
                line,
            } => {
                if let Some(slot) = self.slots.get_mut(worker) {
                    match stream {
                        Stream::Stdout => slot.stdout_line(&line, progress),
                        Stream::Stderr => slot.stderr_line(&line, progress),
                    }
                }
            }
            Msg::Closed { worker } => {
                if let Some(slot) = self.slots.get_mut(worker) {
                    slot.stream_closed();
                }
            }
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            slot.kill(KillReason::Interrupted);
        }
    }
}

/// Reads `source` line by line on a new thread, sending every line, then [`Msg::Closed`].
fn forward(
    worker: usize,
    stream: Stream,
    source: impl Read + Send + 'static,
    tx: Sender<Msg>,
) -> io::Result<()> {
    thread::Builder::new()
        .name(format!("worker-{worker}-{stream:?}"))
        .spawn(move || {
            for line in BufReader::new(source).lines() {
                let Ok(line) = line else { break };
                let msg = Msg::Line {
                    worker,
                    stream,
                    line,
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
            let _ = tx.send(Msg::Closed { worker });
        })
        .map(drop)
}
