//! Recording a history across OS processes: each process appends one JSON line per operation
//! to a file of its own in one directory, timed on `CLOCK_MONOTONIC` (one clock for every
//! process of the machine, which no wall-clock jump moves), and the parent reads them all back
//! into a [`History`] for [`check`](super::check).
//!
//! The process tests of [`crate::exclusion`] record this way: the parent puts the directory in
//! the children's environment ([`HISTORY_DIR_VAR`]) and each child's contended loop finds its
//! [`Recorder`] there.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use nix::time::{ClockId, clock_gettime};
use serde::{Deserialize, Serialize};

use super::{FencedWrite, History, Hold, Share, Verdict, check};

/// The environment variable that names the directory a child process records its history in.
pub const HISTORY_DIR_VAR: &str = "DISTLOCK_HISTORY_DIR";

/// `CLOCK_MONOTONIC` now, ns: the recorder's clock.
pub fn monotonic_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
        let nanos = u64::try_from(t.tv_nsec()).unwrap_or(0);
        secs.saturating_mul(1_000_000_000).saturating_add(nanos)
    })
}

/// A tokio instant (a lease's `valid_until`) on the recorder's clock, ns.
pub fn instant_ns(at: tokio::time::Instant) -> u64 {
    let (now, now_ns) = (tokio::time::Instant::now(), monotonic_ns());
    let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    if at >= now {
        now_ns.saturating_add(nanos(at - now))
    } else {
        now_ns.saturating_sub(nanos(now - at))
    }
}

/// One line of a recorded history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Line {
    Hold(Hold),
    Write(FencedWrite),
}

/// Appends one process's operations to its file, a line each, written at once.
#[derive(Debug)]
pub struct Recorder {
    process: u32,
    file: Mutex<File>,
}

impl Recorder {
    /// Records as `process` into `dir/<process>.jsonl` (appending).
    ///
    /// # Errors
    /// If the file cannot be opened.
    pub fn create(dir: &Path, process: u32) -> io::Result<Recorder> {
        let path = dir.join(format!("{process}.jsonl"));
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Recorder {
            process,
            file: Mutex::new(file),
        })
    }

    /// A recorder for this process (its PID) in the directory [`HISTORY_DIR_VAR`] names;
    /// `None` when it is not set.
    ///
    /// # Panics
    /// When the variable is set but the file cannot be opened: a test that asked for a history
    /// must not run without one.
    pub fn from_env() -> Option<Recorder> {
        let dir = PathBuf::from(std::env::var_os(HISTORY_DIR_VAR)?);
        let recorder = Recorder::create(&dir, std::process::id())
            .unwrap_or_else(|e| panic!("the history file in {}: {e}", dir.display()));
        Some(recorder)
    }

    /// The process number it records as.
    pub fn process(&self) -> u32 {
        self.process
    }

    /// Records a grant's valid lease.
    ///
    /// # Panics
    /// When the line cannot be written.
    pub fn hold(&self, hold: Hold) {
        self.line(&Line::Hold(hold));
    }

    /// Records `guard`'s valid lease on `name` as a hold of `share`: from `start_ns` (when the
    /// grant arrived; `requested_ns`, when it was asked for) until now or the lease's
    /// `valid_until`, whichever came first. Call it just before releasing. A grant of `k`
    /// permits is recorded as `k` holds (the checker counts permit holds against the
    /// semaphore's permits).
    ///
    /// # Panics
    /// When the line cannot be written.
    pub fn lease(
        &self,
        name: &str,
        guard: &lock_core::Guard,
        (requested_ns, start_ns): (u64, u64),
        share: Share,
    ) {
        let end_ns = monotonic_ns().min(instant_ns(guard.valid_until()));
        self.hold(Hold {
            name: name.to_owned(),
            process: self.process,
            token: guard.fencing_token(),
            requested_ns,
            start_ns,
            end_ns: end_ns.max(start_ns),
            share,
        });
    }

    /// Records a fenced write.
    ///
    /// # Panics
    /// When the line cannot be written.
    pub fn write(&self, write: FencedWrite) {
        self.line(&Line::Write(write));
    }

    fn line(&self, line: &Line) {
        let mut text = serde_json::to_string(line).expect("a history line encodes");
        text.push('\n');
        // One write per line on an append-mode file: lines never interleave.
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        file.write_all(text.as_bytes())
            .expect("the history line is written");
    }
}

/// A temporary directory that processes record their histories in (removed when dropped):
/// the parent makes one, hands [`env`](Self::env) to its children, and reads it back.
#[derive(Debug)]
pub struct HistoryDir {
    dir: tempfile::TempDir,
}

impl HistoryDir {
    /// A new, empty directory.
    ///
    /// # Errors
    /// If it cannot be created.
    pub fn new() -> io::Result<HistoryDir> {
        let dir = tempfile::Builder::new()
            .prefix("distlock-history-")
            .tempdir()?;
        Ok(HistoryDir { dir })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The environment entry that names it to a child process ([`HISTORY_DIR_VAR`]).
    pub fn env(&self) -> (&'static str, String) {
        (HISTORY_DIR_VAR, self.path().display().to_string())
    }

    /// Checks what was recorded in it: exactly `holds` holds (every grant recorded), and no
    /// violation of exclusion, permits, token growth or the fenced register
    /// ([`Verdict::violations`]). Returns the verdict for further assertions.
    ///
    /// # Panics
    /// When the histories cannot be read, the count differs, or a rule was broken.
    pub fn assert_correct(&self, holds: usize) -> Verdict {
        let recorded = self.read().expect("the recorded histories");
        assert_eq!(recorded.holds.len(), holds, "every grant recorded");
        let verdict = check(&recorded);
        let violations = verdict.violations();
        assert!(
            violations.is_empty(),
            "the history checker: {}",
            violations.join("; ")
        );
        verdict
    }

    /// Everything recorded in it so far (see [`read_dir`]).
    ///
    /// # Errors
    /// If a file cannot be read or a line does not parse.
    pub fn read(&self) -> io::Result<History> {
        read_dir(self.path())
    }
}

/// Every operation recorded in `dir`'s `*.jsonl` files, as one history (no logs; the default
/// fence rule and no slack).
///
/// # Errors
/// If a file cannot be read or a line does not parse.
pub fn read_dir(dir: &Path) -> io::Result<History> {
    let mut history = History::default();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        for line in BufReader::new(File::open(&path)?).lines() {
            let line = line?;
            let parsed: Line = serde_json::from_str(&line).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}: {line}", path.display()),
                )
            })?;
            match parsed {
                Line::Hold(h) => history.holds.push(h),
                Line::Write(w) => history.writes.push(w),
            }
        }
    }
    Ok(history)
}

#[cfg(test)]
mod tests {
    use super::super::WriteOutcome;
    use super::*;

    #[test]
    fn two_processes_record_and_are_read_back_as_one_history() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hold = |process, token, start_ns, end_ns| Hold {
            name: "n".to_owned(),
            process,
            token,
            requested_ns: start_ns - 1,
            start_ns,
            end_ns,
            share: Share::Exclusive,
        };
        let a = Recorder::create(dir.path(), 1).expect("a");
        let b = Recorder::create(dir.path(), 2).expect("b");
        a.hold(hold(1, 5, 10, 20));
        b.hold(hold(2, 6, 15, 30));
        b.write(FencedWrite {
            name: "n".to_owned(),
            process: 2,
            token: 6,
            invoke_ns: 16,
            outcome: WriteOutcome::Accepted { at_ns: 17 },
        });
        let history = read_dir(dir.path()).expect("read");
        assert_eq!((history.holds.len(), history.writes.len()), (2, 1));
        assert_eq!(check(&history).overlaps.len(), 1, "10–20 and 15–30 overlap");
        let before = monotonic_ns();
        let later = instant_ns(tokio::time::Instant::now() + std::time::Duration::from_secs(1));
        assert!(later > before && later - before <= 1_100_000_000);
    }

    /// Two processes that held one lock at once: the parent's judgement of the directory fails.
    #[test]
    #[should_panic(expected = "the history checker")]
    fn a_directory_with_two_holders_at_once_fails_its_judgement() {
        let dir = HistoryDir::new().expect("dir");
        for process in [1, 2] {
            Recorder::create(dir.path(), process)
                .expect("recorder")
                .hold(Hold {
                    name: "n".to_owned(),
                    process,
                    token: u64::from(process),
                    requested_ns: 5,
                    start_ns: 10 * u64::from(process),
                    end_ns: 100,
                    share: Share::Exclusive,
                });
        }
        dir.assert_correct(2);
    }
}
