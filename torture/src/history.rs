//! The recorded history: what every worker and the fault schedule did, and when.
//!
//! Each process appends JSON lines to its own file, one [`Record`] per line, flushed at once,
//! so that a worker stopped or killed mid-run leaves everything it did before on disk, and the
//! runner can follow the files while the run goes on. Times are nanoseconds of the system's
//! `CLOCK_MONOTONIC`: every process runs on one machine, where that clock is one for all of
//! them, and neither an NTP step nor libfaketime's wall-clock jumps (the clock scenarios) move
//! it, so the history's order is the real one whatever the faults do to the wall clocks.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

use serde::{Deserialize, Serialize};

/// The lock every worker contends for: the mutex and the kinds take this one name, and their
/// records carry none (the checker files them under it). The multi-lock takes names made from
/// it (`torture:lock:0`, …), and its records name theirs.
pub const LOCK_NAME: &str = "torture:lock";

/// Nanoseconds of the system-wide `CLOCK_MONOTONIC` (since boot, not counting suspend), now:
/// comparable across the processes of one machine, and moved by no wall-clock fault.
pub fn now_ns() -> u64 {
    // Never fails for CLOCK_MONOTONIC on Linux; a zero would only put the record first.
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
        let nanos = u64::try_from(t.tv_nsec()).unwrap_or(0);
        secs.saturating_mul(1_000_000_000).saturating_add(nanos)
    })
}

/// A local monotonic instant on the history's clock ([`now_ns`]): now plus (or minus) the
/// distance to it. Leases carry `valid_until` as a monotonic instant (`std`'s `Instant` is
/// `CLOCK_MONOTONIC` too, but does not show its reading).
pub fn wall_ns(instant: tokio::time::Instant) -> u64 {
    let now_history = now_ns();
    let now = tokio::time::Instant::now();
    if instant >= now {
        now_history.saturating_add(nanos(instant - now))
    } else {
        now_history.saturating_sub(nanos(now - instant))
    }
}

/// A duration in whole nanoseconds, saturating.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One line of history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// When the event happened (for replies: when the reply arrived), [`now_ns`]'s clock.
    pub at_ns: u64,
    /// The worker that recorded it; `None` for the runner's fault records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
    /// The lock name it concerns, where a worker holds several at once (the multi-lock);
    /// `None`: [`LOCK_NAME`], the run's one lock (the histories of the other kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

impl Record {
    /// The lock name it concerns: its own, or [`LOCK_NAME`].
    pub fn lock(&self) -> &str {
        self.lock.as_deref().unwrap_or(LOCK_NAME)
    }
}

/// What a grant lets its holder share, for the checker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// Alone: a mutex, the write lock of a read-write lock, a fair lock.
    #[default]
    Exclusive,
    /// A reader's share of a read-write lock: beside other readers, never beside an
    /// exclusive holder.
    Read,
    /// One permit of a semaphore of `max` permits: at most `max` holders at once.
    Permit {
        /// The semaphore's permits.
        max: u32,
    },
}

impl Held {
    /// Whether the grant excludes every other holder.
    pub fn is_exclusive(&self) -> bool {
        *self == Held::Exclusive
    }
}

/// What a worker or the runner recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The worker process started and connected.
    Started {
        /// Its process id.
        pid: u32,
    },
    /// The lock was granted; `at_ns` is when the grant reached the worker.
    Granted {
        /// When the acquire request was made.
        requested_ns: u64,
        /// The lease's fencing token.
        token: u64,
        /// The lease's `valid_until`, on the history's clock.
        valid_until_ns: u64,
        /// How far each renewal moves `valid_until` (the locker's lease).
        lease_ns: u64,
        /// What the grant shares; absent (exclusive) in the histories of mutex runs.
        #[serde(default, skip_serializing_if = "Held::is_exclusive")]
        held: Held,
    },
    /// An acquire gave up or failed.
    AcquireFailed {
        /// When the acquire request was made.
        requested_ns: u64,
        /// The error, as text.
        error: String,
    },
    /// A read-modify-write of the plain counter finished; `at_ns` is the `SET`'s reply.
    Increment {
        /// The fencing token of the lease it was made under.
        token: u64,
        /// When the `GET` was sent.
        read_ns: u64,
        /// The value read (and written plus one).
        read: u64,
    },
    /// A fenced write was answered; `at_ns` is the reply.
    Write {
        /// The writer's fencing token.
        token: u64,
        /// When the write was sent.
        sent_ns: u64,
        /// Whether the resource accepted it.
        accepted: bool,
    },
    /// The worker is about to release; `at_ns` is just before the release is sent.
    ReleaseSent {
        /// The lease's fencing token.
        token: u64,
        /// The lease's latest `valid_until` (renewals move it), on the history's clock.
        valid_until_ns: u64,
        /// Whether the worker's guard still believed it held the lease.
        held: bool,
    },
    /// The release was answered.
    Released {
        /// The lease's fencing token.
        token: u64,
        /// `"ours"`, `"not_ours"` or the error.
        outcome: String,
    },
    /// The locker's watchdog finished one renewal (seen through its metrics).
    Renewal {
        /// `ok`, `not_owned` or `error`.
        outcome: String,
    },
    /// A command of the worker's own (counter, resource) failed.
    Error {
        /// What the worker was doing.
        op: String,
        /// The error, as text.
        message: String,
        /// For a fenced write, its fencing token: its outcome is unknown (a store faulted under
        /// it, as etcd's may, can have applied it without answering), so the resource's log
        /// may hold it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<u64>,
    },
    /// The worker reached its deadline.
    Finished,
    /// The runner started a fault.
    FaultStarted {
        /// What the fault is.
        label: String,
    },
    /// The runner ended a fault (healed the network, restarted or resumed the process).
    FaultHealed {
        /// What the fault was.
        label: String,
    },
}

/// Appends records to one history file, each flushed as it is written.
#[derive(Debug)]
pub struct HistoryWriter {
    worker: Option<u32>,
    file: Mutex<File>,
}

impl HistoryWriter {
    /// Creates (or appends to) `path`, recording as `worker` (`None`: the runner).
    ///
    /// # Errors
    /// If the file cannot be opened.
    pub fn create(path: &Path, worker: Option<u32>) -> io::Result<HistoryWriter> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(HistoryWriter {
            worker,
            file: Mutex::new(file),
        })
    }

    /// Records `event` as happening now.
    pub fn record(&self, event: Event) {
        self.record_at(now_ns(), event);
    }

    /// Records `event` about lock `lock` (a multi-lock's name) as happening now.
    pub fn record_on(&self, lock: &str, event: Event) {
        self.write(Record {
            at_ns: now_ns(),
            worker: self.worker,
            lock: Some(lock.to_owned()),
            event,
        });
    }

    /// Records `event` as happening at `at_ns`.
    pub fn record_at(&self, at_ns: u64, event: Event) {
        self.write(Record {
            at_ns,
            worker: self.worker,
            lock: None,
            event,
        });
    }

    /// Appends `record`. A failed write is reported on stderr and otherwise ignored: a worker
    /// must not stop because its disk is full, and the checker then sees a history with a gap,
    /// which makes the run fail on its own.
    fn write(&self, record: Record) {
        let line = match serde_json::to_string(&record) {
            Ok(line) => line + "\n",
            Err(e) => {
                eprintln!("history: cannot encode {record:?}: {e}");
                return;
            }
        };
        // One write per line on an append-mode file: lines from one process never interleave,
        // and a reader never sees half a line followed by another line.
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = file.write_all(line.as_bytes()) {
            eprintln!("history: cannot write: {e}");
        }
    }
}

/// Reads every record of one history file, in the order they were written.
///
/// # Errors
/// If the file cannot be read or a complete line does not parse. A last line without its
/// newline (the process died writing it) is ignored.
pub fn read_file(path: &Path) -> io::Result<Vec<Record>> {
    let mut tail = Tail::new(path.to_path_buf());
    tail.read_new()
}

/// Follows one history file while it grows: each call returns the records appended since the
/// last one.
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    offset: u64,
}

impl Tail {
    /// Follows `path` from its beginning (it need not exist yet).
    pub fn new(path: PathBuf) -> Tail {
        Tail { path, offset: 0 }
    }

    /// The complete records appended since the last call.
    ///
    /// # Errors
    /// If the file exists but cannot be read, or a complete line does not parse.
    pub fn read_new(&mut self) -> io::Result<Vec<Record>> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut reader = BufReader::new(file);
        let mut records = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            let n = reader.read_line(&mut line)?;
            if n == 0 || !line.ends_with('\n') {
                break; // nothing more, or a line still being written
            }
            self.offset += n as u64;
            let record = serde_json::from_str(line.trim_end()).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}: {line}", self.path.display()),
                )
            })?;
            records.push(record);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("w.jsonl");
        let writer = HistoryWriter::create(&path, Some(3)).expect("create");
        let mut tail = Tail::new(path.clone());
        assert!(tail.read_new().expect("empty").is_empty());
        writer.record_at(
            10,
            Event::Write {
                token: 7,
                sent_ns: 5,
                accepted: false,
            },
        );
        let first = tail.read_new().expect("first");
        assert_eq!(
            first,
            vec![Record {
                at_ns: 10,
                worker: Some(3),
                lock: None,
                event: Event::Write {
                    token: 7,
                    sent_ns: 5,
                    accepted: false
                }
            }]
        );
        writer.record(Event::Finished);
        let second = tail.read_new().expect("second");
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].event, Event::Finished);
        assert_eq!(read_file(&path).expect("all").len(), 2);
    }

    #[test]
    fn a_half_written_line_waits_for_its_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("w.jsonl");
        std::fs::write(&path, "{\"at_ns\":1,\"kind\":\"finished\"}\n{\"at_ns\":2,").expect("write");
        let mut tail = Tail::new(path.clone());
        assert_eq!(tail.read_new().expect("read").len(), 1);
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(b"\"kind\":\"finished\"}\n").expect("append");
        let rest = tail.read_new().expect("rest");
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].at_ns, 2);
    }

    #[test]
    fn instants_map_onto_the_wall_clock() {
        let later = tokio::time::Instant::now() + Duration::from_secs(5);
        let gap = wall_ns(later).saturating_sub(now_ns());
        assert!(gap > nanos(Duration::from_secs(4)) && gap <= nanos(Duration::from_secs(5)));
    }
}
