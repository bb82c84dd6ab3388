//! One worker process as the supervisor sees it: its process, what it reported, and whether
//! it failed.

use std::process::{Child, ExitStatus};

use crate::progress::Progress;
use crate::protocol::{Event, StallOutcome, Summary};

/// Problems kept per worker for the report.
const MAX_PROBLEMS: usize = 5;

/// Notes printed per worker while it runs; the rest are only counted.
const MAX_NOTES: u32 = 10;

/// Why the supervisor killed a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KillReason {
    /// It was still running well after the deadline.
    Overran,
    /// The user pressed Ctrl-C.
    Interrupted,
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Exit {
    /// It exited on its own.
    Exited(ExitStatus),
    /// The supervisor killed it.
    Killed(KillReason),
}

/// Counts kept from a worker's events as they arrive.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Live {
    /// Locks granted.
    pub(crate) acquisitions: u64,
    /// Simulated stalls.
    pub(crate) stalls: u64,
    /// Stale writes rejected.
    pub(crate) stale_rejected: u64,
    /// Stale writes accepted.
    pub(crate) stale_accepted: u64,
    /// Exclusion violations.
    pub(crate) violations: u64,
    /// Acquisitions that gave up waiting.
    pub(crate) wait_timeouts: u64,
    /// Errors reported.
    pub(crate) errors: u64,
}

/// One worker process and what is known about it.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The worker's number.
    pub(crate) index: u32,
    /// Its process id.
    pub(crate) pid: u32,
    /// The process, until it is reaped.
    child: Option<Child>,
    /// How it ended, once it has.
    exit: Option<Exit>,
    /// Output streams still being read.
    open_streams: u8,
    /// Counts from its events.
    pub(crate) live: Live,
    /// Its waits for the lock, in microseconds, one per `acquired` line.
    pub(crate) waits_us: Vec<u64>,
    /// Its summary line, if it sent one.
    pub(crate) summary: Option<Summary>,
    /// The first few errors and stray lines, for the report.
    problems: Vec<String>,
    /// Lines on stdout that were not protocol lines.
    bad_lines: u64,
    /// Notes printed so far.
    notes: u32,
}

impl Slot {
    /// A worker just started as `child`, none of whose output is being read yet.
    pub(crate) fn new(index: u32, child: Child) -> Self {
        Self {
            index,
            pid: child.id(),
            child: Some(child),
            exit: None,
            open_streams: 0,
            live: Live::default(),
            waits_us: Vec::new(),
            summary: None,
            problems: Vec::new(),
            bad_lines: 0,
            notes: 0,
        }
    }

    /// One more of its output streams is being read.
    pub(crate) fn stream_opened(&mut self) {
        self.open_streams += 1;
    }

    /// One of its output streams has ended.
    pub(crate) fn stream_closed(&mut self) {
        self.open_streams = self.open_streams.saturating_sub(1);
    }

    /// Takes a line of its stdout (a protocol line) into account.
    pub(crate) fn stdout_line(&mut self, line: &str, progress: &Progress) {
        match line.parse::<Event>() {
            Ok(event) => self.record(event, progress),
            Err(e) => {
                self.bad_lines += 1;
                self.note(progress, &e.to_string());
                self.problem(e.to_string());
            }
        }
    }

    /// Takes a line of its stderr into account: shown and kept, but not a failure by itself
    /// (a panic also makes the exit status non-zero).
    pub(crate) fn stderr_line(&mut self, line: &str, progress: &Progress) {
        self.note(progress, &format!("(stderr) {line}"));
        self.problem(format!("stderr: {line}"));
    }

    /// Whether the process has ended and all its output has been read.
    pub(crate) fn finished(&self) -> bool {
        self.exit.is_some() && self.open_streams == 0
    }

    /// Whether the process has ended.
    pub(crate) fn exited(&self) -> bool {
        self.exit.is_some()
    }

    /// Why this worker counts as failed, or `None` if it ran cleanly to its end.
    pub(crate) fn failure(&self) -> Option<String> {
        match self.exit {
            None => return Some("still running".to_owned()),
            Some(Exit::Killed(KillReason::Overran)) => {
                return Some("killed: still running long after the deadline".to_owned());
            }
            Some(Exit::Killed(KillReason::Interrupted)) => {
                return Some("killed: interrupted".to_owned());
            }
            Some(Exit::Exited(status)) if !status.success() => {
                return Some(format!("exited with {status}"));
            }
            Some(Exit::Exited(_)) => {}
        }
        let Some(summary) = &self.summary else {
            return Some("sent no summary".to_owned());
        };
        if summary.errors > 0 {
            return Some(format!("{} failed operations", summary.errors));
        }
        if summary.acquisitions != self.live.acquisitions {
            return Some(format!(
                "summary says {} acquisitions, progress lines {}",
                summary.acquisitions, self.live.acquisitions
            ));
        }
        if self.bad_lines > 0 {
            return Some(format!("{} unreadable output lines", self.bad_lines));
        }
        None
    }

    /// The worker's figures: its summary, or when it sent none, what its events showed (the
    /// counts no event carries, such as increments, are then 0).
    pub(crate) fn figures(&self) -> Summary {
        self.summary.unwrap_or(Summary {
            acquisitions: self.live.acquisitions,
            stalls: self.live.stalls,
            stale_rejected: self.live.stale_rejected,
            stale_accepted: self.live.stale_accepted,
            violations: self.live.violations,
            wait_timeouts: self.live.wait_timeouts,
            errors: self.live.errors,
            ..Summary::default()
        })
    }

    /// The first few errors and stray lines.
    pub(crate) fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Prints `text` about this worker, up to [`MAX_NOTES`] times.
    fn note(&mut self, progress: &Progress, text: &str) {
        self.notes += 1;
        if self.notes <= MAX_NOTES {
            progress.note(&format!("worker {}: {text}", self.index));
        }
        if self.notes == MAX_NOTES {
            progress.note(&format!(
                "worker {}: (further messages are counted, not shown)",
                self.index
            ));
        }
    }

    /// Keeps `text` for the report, up to [`MAX_PROBLEMS`] of them.
    fn problem(&mut self, text: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(text);
        }
    }

    /// Takes one protocol event into account.
    fn record(&mut self, event: Event, progress: &Progress) {
        match event {
            Event::Acquired { wait_us } => {
                self.live.acquisitions += 1;
                self.waits_us.push(wait_us);
            }
            Event::Stall(outcome) => {
                self.live.stalls += 1;
                match outcome {
                    StallOutcome::Rejected => self.live.stale_rejected += 1,
                    StallOutcome::Accepted => {
                        self.live.stale_accepted += 1;
                        self.note(
                            progress,
                            "a STALE WRITE WAS ACCEPTED by the fenced resource",
                        );
                    }
                    StallOutcome::Unchecked => {}
                }
            }
            Event::Violation { inside } => {
                self.live.violations += 1;
                self.note(
                    progress,
                    &format!("EXCLUSION VIOLATION: {inside} holders inside at once"),
                );
            }
            Event::WaitTimeout => self.live.wait_timeouts += 1,
            Event::Error(text) => {
                self.live.errors += 1;
                self.note(progress, &format!("error: {text}"));
                self.problem(text);
            }
            Event::Summary(summary) => self.summary = Some(summary),
        }
    }

    /// Reaps the process if it has exited.
    pub(crate) fn reap(&mut self) {
        if let Some(child) = &mut self.child {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.exit = Some(Exit::Exited(status));
                    self.child = None;
                }
                Ok(None) => {}
                Err(e) => self.problem(format!("cannot check the process: {e}")),
            }
        }
    }

    /// Kills the process by its PID (unless it has just exited on its own) and reaps it.
    pub(crate) fn kill(&mut self, reason: KillReason) {
        self.reap();
        if let Some(mut child) = self.child.take() {
            // `Child::kill` sends SIGKILL to this child's PID only (never to a process group or
            // by name). It is not reaped yet, so the PID is still its own; an error would only
            // mean it is already gone, and `wait` reaps it either way.
            let _ = child.kill();
            let _ = child.wait();
            self.exit = Some(Exit::Killed(reason));
        }
    }
}
