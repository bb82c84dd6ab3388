//! S7 and S8: the lock kinds under contention, tasks of one process on one name, each holding
//! ~1 ms (S3's hold), waiting with the `Locker`'s defaults.
//!
//! - S7: 16 tasks on a read-write lock, each choosing per acquisition (a seeded RNG, so every
//!   run makes the same choices) to read (90 %) or write (10 %); then the same tasks with the
//!   same choices on the exclusive lock (`locker.lock`), which is what the read-write lock is
//!   for doing better than.
//! - S8: 32 tasks on a semaphore of 8 permits, one permit each.
//!
//! Correctness, counted rather than assumed: every holder registers inside the critical
//! section with atomics, so a writer that finds anyone inside, a reader that finds a writer, or
//! a permit holder that finds the permits all taken is a violation; writers also update a
//! counter non-atomically over their hold, as S3's workers do, so an overlap loses an update.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::{LockRequest, Locker};
use serde::Serialize;
use tokio::time::Instant;

use crate::info::{Cost, Probe};
use crate::stats::{Latency, nanos};
use crate::window::Timing;
use crate::window::{self, Phase};

/// The read-write lock (`locker.read` / `locker.write`), S7.
pub(crate) const READ_WRITE: &str = "read-write lock";
/// The exclusive lock (`locker.lock`) on S7's workload.
pub(crate) const EXCLUSIVE: &str = "exclusive lock";
/// The semaphore, S8.
pub(crate) const SEMAPHORE: &str = "semaphore";

/// The seed of task 0's choices; task `i` uses `SEED + i`.
const SEED: u64 = 13;

/// No task takes the lock more often than this, whatever the clock says.
const MAX_ACQUISITIONS_PER_TASK: u64 = 10_000_000;

/// How long the tasks may take to finish after the end of a run (each waits at most the
/// default wait for its last acquisition).
const FINISH_WITHIN: Duration = Duration::from_secs(30);

/// What the tasks ask for.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Workload {
    /// `locker.write(name)` with probability `writes`, else `locker.read(name)`.
    ReadWrite { writes: f64 },
    /// The same choices, every one of them `locker.lock(name)`.
    Exclusive { writes: f64 },
    /// One permit of `locker.semaphore(name, max)`.
    Semaphore { max: u32 },
}

impl Workload {
    /// The label of the client in the tables.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::ReadWrite { .. } => READ_WRITE,
            Self::Exclusive { .. } => EXCLUSIVE,
            Self::Semaphore { .. } => SEMAPHORE,
        }
    }

    /// The scenario it belongs to.
    pub(crate) fn scenario(self) -> &'static str {
        match self {
            Self::ReadWrite { .. } | Self::Exclusive { .. } => "S7",
            Self::Semaphore { .. } => "S8",
        }
    }

    fn writes(self) -> f64 {
        match self {
            Self::ReadWrite { writes } | Self::Exclusive { writes } => writes,
            Self::Semaphore { .. } => 0.0,
        }
    }

    fn request(self, locker: &Locker, name: &Arc<str>, write: bool) -> LockRequest {
        let name = Arc::clone(name);
        match self {
            Self::ReadWrite { .. } if write => locker.write(name),
            Self::ReadWrite { .. } => locker.read(name),
            Self::Exclusive { .. } => locker.lock(name),
            Self::Semaphore { max } => locker.semaphore(name, max),
        }
    }

    /// Whether a holder must be alone.
    fn exclusive(self, write: bool) -> bool {
        match self {
            Self::ReadWrite { .. } => write,
            Self::Exclusive { .. } => true,
            Self::Semaphore { .. } => false,
        }
    }

    /// How many shared holders may be inside at once.
    fn limit(self) -> u64 {
        match self {
            Self::Semaphore { max } => u64::from(max),
            _ => u64::MAX,
        }
    }
}

/// The result of one workload in S7 or S8.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SharingRun {
    pub(crate) scenario: &'static str,
    pub(crate) client: &'static str,
    pub(crate) workload: Workload,
    pub(crate) tasks: usize,
    /// How long each holds (asked for; the timer rounds it up).
    pub(crate) hold_ms: f64,
    /// Grants in the measured window, and how many of them were writes.
    pub(crate) acquisitions: u64,
    pub(crate) writes: u64,
    pub(crate) seconds: f64,
    pub(crate) per_second: f64,
    /// From asking to the grant: every acquisition, and the writes alone.
    pub(crate) wait: Latency,
    pub(crate) write_wait: Latency,
    /// How long holds really lasted.
    pub(crate) hold: Latency,
    /// Server commands, client and server CPU per acquisition.
    pub(crate) cost: Cost,
    /// The most shared holders (readers, permit holders) seen inside at once.
    pub(crate) max_shared: u64,
    /// Times a holder found the critical section in a state its grant rules out.
    pub(crate) violations: u64,
    /// Writes over the whole run, warm-up included, and the counter they incremented.
    pub(crate) total_writes: u64,
    pub(crate) counter: u64,
    /// `total_writes - counter`: increments lost because a writer was not alone.
    pub(crate) lost_updates: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

impl SharingRun {
    /// Whether the run saw anything the lock rules out, or errors.
    pub(crate) fn failed(&self) -> bool {
        self.errors > 0 || self.violations > 0 || self.lost_updates > 0
    }
}

/// Who is inside the critical section.
#[derive(Default)]
struct Inside {
    shared: AtomicU64,
    exclusive: AtomicU64,
    max_shared: AtomicU64,
    violations: AtomicU64,
    counter: AtomicU64,
}

impl Inside {
    /// Registers a holder. Sequentially consistent: of two holders that overlap, the later
    /// one to register sees the other.
    fn enter(&self, exclusive: bool, limit: u64) {
        let ok = if exclusive {
            self.exclusive.fetch_add(1, Ordering::SeqCst) == 0
                && self.shared.load(Ordering::SeqCst) == 0
        } else {
            let n = self.shared.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_shared.fetch_max(n, Ordering::SeqCst);
            n <= limit && self.exclusive.load(Ordering::SeqCst) == 0
        };
        if !ok {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self, exclusive: bool) {
        let count = if exclusive {
            &self.exclusive
        } else {
            &self.shared
        };
        count.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct TaskResult {
    acquisitions: u64,
    writes: u64,
    total_writes: u64,
    waits: Vec<u64>,
    write_waits: Vec<u64>,
    holds: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// Runs `tasks` tasks of `workload` through `locker` on the one name `name`.
pub(crate) async fn run(
    workload: Workload,
    locker: Locker,
    name: &str,
    tasks: usize,
    hold: Duration,
    timing: Timing,
    probe: &mut Probe,
) -> Result<SharingRun, String> {
    let name: Arc<str> = Arc::from(name);
    let inside = Arc::new(Inside::default());
    let scenario = workload.scenario();
    let measured = window::measure(
        &format!("{scenario} {}", workload.label()),
        tasks,
        |i, phase| {
            let (locker, name, inside) = (locker.clone(), Arc::clone(&name), Arc::clone(&inside));
            async move { task(i, workload, &locker, &name, hold, &phase, &inside).await }
        },
        timing,
        FINISH_WITHIN,
        probe,
    )
    .await?;
    let mut all = TaskResult::default();
    for r in measured.results {
        all.acquisitions += r.acquisitions;
        all.writes += r.writes;
        all.total_writes += r.total_writes;
        all.waits.extend(r.waits);
        all.write_waits.extend(r.write_waits);
        all.holds.extend(r.holds);
        all.errors += r.errors;
        all.first_error = all.first_error.or(r.first_error);
    }
    let counter = inside.counter.load(Ordering::Acquire);
    Ok(SharingRun {
        scenario,
        client: workload.label(),
        workload,
        tasks,
        hold_ms: hold.as_secs_f64() * 1e3,
        acquisitions: all.acquisitions,
        writes: all.writes,
        seconds: measured.seconds,
        per_second: crate::stats::ratio(all.acquisitions as f64, measured.seconds),
        wait: Latency::from_nanos(&mut all.waits),
        write_wait: Latency::from_nanos(&mut all.write_waits),
        hold: Latency::from_nanos(&mut all.holds),
        cost: measured.delta.cost(all.acquisitions),
        max_shared: inside.max_shared.load(Ordering::Acquire),
        violations: inside.violations.load(Ordering::Acquire),
        total_writes: all.total_writes,
        counter,
        lost_updates: all.total_writes.saturating_sub(counter),
        errors: all.errors,
        first_error: all.first_error,
    })
}

async fn task(
    i: usize,
    workload: Workload,
    locker: &Locker,
    name: &Arc<str>,
    hold: Duration,
    phase: &Phase,
    inside: &Inside,
) -> TaskResult {
    let mut rng = fastrand::Rng::with_seed(SEED + i as u64);
    let mut out = TaskResult::default();
    for _ in 0..MAX_ACQUISITIONS_PER_TASK {
        if phase.stopped() {
            break;
        }
        let write = rng.f64() < workload.writes();
        let asked = Instant::now();
        let guard = match workload.request(locker, name, write).acquire().await {
            Ok(guard) => guard,
            Err(error) => {
                out.errors += 1;
                out.first_error.get_or_insert(error.to_string());
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let granted = Instant::now();
        let measured = phase.measuring();
        let exclusive = workload.exclusive(write);
        inside.enter(exclusive, workload.limit());
        if write {
            // A read-modify-write spread over the hold: a writer not alone loses an update.
            let value = inside.counter.load(Ordering::Acquire);
            tokio::time::sleep(hold).await;
            inside.counter.store(value + 1, Ordering::Release);
        } else {
            tokio::time::sleep(hold).await;
        }
        inside.leave(exclusive);
        let held = granted.elapsed();
        if let Err(error) = guard.release().await {
            out.errors += 1;
            out.first_error.get_or_insert(error.to_string());
        }
        out.total_writes += u64::from(write);
        if measured {
            out.acquisitions += 1;
            out.writes += u64::from(write);
            let wait = nanos(granted.duration_since(asked));
            out.waits.push(wait);
            if write {
                out.write_waits.push(wait);
            }
            out.holds.push(nanos(held));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_counts_what_a_grant_rules_out() {
        let rw = Inside::default();
        rw.enter(false, u64::MAX);
        rw.enter(false, u64::MAX);
        assert_eq!(rw.violations.load(Ordering::SeqCst), 0);
        rw.enter(true, u64::MAX);
        assert_eq!(rw.violations.load(Ordering::SeqCst), 1);
        rw.leave(true);
        rw.leave(false);
        rw.leave(false);
        rw.enter(true, u64::MAX);
        assert_eq!(rw.violations.load(Ordering::SeqCst), 1);
        assert_eq!(rw.max_shared.load(Ordering::SeqCst), 2);

        let permits = Inside::default();
        for _ in 0..3 {
            permits.enter(false, 2);
        }
        assert_eq!(permits.violations.load(Ordering::SeqCst), 1);
        assert_eq!(permits.max_shared.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn the_same_tasks_make_the_same_choices() {
        let choices = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..1000).filter(|_| rng.f64() < 0.1).count()
        };
        assert_eq!(choices(SEED), choices(SEED));
        assert!((50..150).contains(&choices(SEED)));
    }
}
