//! S3: workers contend for one name, each holding it ~1 ms, waiting for it with the client's
//! own mechanism (distlock: its defaults — the local line and release wake-ups; the
//! hand-written lock: a fixed 1 ms poll; rslock: its retry loop, `LockManager::acquire`). Measures the handoff gap, who wins the next grant,
//! the server commands each acquisition costs, and whether a non-atomic counter updated
//! under the lock ends exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use distlock_bench::HandLock;
use lock_core::{DEFAULT_WAIT, Guard, LockError, Locker};
use serde::Serialize;
use tokio::time::Instant;

use crate::cycles::TTL;
use crate::info::{Cost, Probe};
use crate::stats::{Latency, nanos};
use crate::window::Timing;
use crate::window::{self, Phase};

/// No worker takes the lock more often than this, whatever the clock says.
const MAX_ACQUISITIONS_PER_WORKER: u64 = 10_000_000;

/// How long the workers may take to finish after the end of a run (each waits at most
/// `DEFAULT_WAIT` for its last acquisition).
const FINISH_WITHIN: Duration = Duration::from_secs(30);

/// Who contends.
#[derive(Clone)]
pub(crate) enum Contender {
    /// `locker.lock(name).acquire()` with the defaults (renewed lease, 10 s wait).
    Locker(Locker),
    /// The hand-written lock: `SET NX PX` every 1 ms until it is ours (same 10 s wait).
    Hand(HandLock),
    /// rslock: `LockManager::acquire`, its retry loop (settings: [`crate::rslock`]), given
    /// the same 10 s wait.
    Rslock(rslock::LockManager),
}

enum ContenderGuard {
    Guard(Guard),
    Hand(String),
    Rslock(rslock::LockGuard),
}

impl Contender {
    async fn acquire(&self, name: &Arc<str>) -> Result<ContenderGuard, String> {
        match self {
            Self::Locker(locker) => locker
                .lock(Arc::clone(name))
                .acquire()
                .await
                .map(ContenderGuard::Guard)
                .map_err(|e| e.to_string()),
            Self::Hand(hand) => hand
                .acquire(name, TTL, Instant::now() + DEFAULT_WAIT)
                .await
                .map_err(|e| e.to_string())?
                .map(ContenderGuard::Hand)
                .ok_or_else(|| "timed out waiting".to_owned()),
            // rslock's acquire loops until it wins; a timeout here is an error of the run.
            Self::Rslock(manager) => {
                tokio::time::timeout(DEFAULT_WAIT, manager.acquire(&**name, TTL))
                    .await
                    .map_err(|_| "timed out waiting".to_owned())?
                    .map(ContenderGuard::Rslock)
                    .map_err(|e| e.to_string())
            }
        }
    }

    async fn release(&self, name: &str, held: ContenderGuard) -> Result<bool, String> {
        match (self, held) {
            (_, ContenderGuard::Guard(guard)) => match guard.release().await {
                Ok(()) => Ok(true),
                Err(LockError::NotOwned { .. }) => Ok(false),
                Err(e) => Err(e.to_string()),
            },
            (Self::Hand(hand), ContenderGuard::Hand(token)) => {
                hand.release(name, &token).await.map_err(|e| e.to_string())
            }
            // rslock's release is best effort and says nothing.
            (_, ContenderGuard::Rslock(guard)) => {
                guard.release().await;
                Ok(true)
            }
            (_, ContenderGuard::Hand(_)) => Err("mismatched lock".to_owned()),
        }
    }
}

/// The result of one client in S3.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HandoffRun {
    pub(crate) client: String,
    pub(crate) workers: usize,
    /// How long each holds the lock (asked for; the timer rounds it up).
    pub(crate) hold_ms: f64,
    /// Acquisitions granted in the measured window.
    pub(crate) acquisitions: u64,
    pub(crate) seconds: f64,
    pub(crate) per_second: f64,
    /// From the moment the holder had the release's reply to the next grant.
    pub(crate) gap: Latency,
    /// From the moment the holder called release (before its round trip) to the next grant:
    /// what the next user waits once the holder is done.
    pub(crate) gap_from_call: Latency,
    /// Grants won by the worker that released just before.
    pub(crate) self_handoff: f64,
    /// How long holds really lasted.
    pub(crate) hold: Latency,
    /// Server commands, client and server CPU per acquisition.
    pub(crate) cost: Cost,
    /// Acquisitions per worker over the whole run (fairness).
    pub(crate) per_worker: Vec<u64>,
    /// Every acquisition of the run, warm-up included, and the counter they incremented.
    pub(crate) total_acquisitions: u64,
    pub(crate) counter: u64,
    /// `total_acquisitions - counter`: increments lost because two held the lock at once.
    pub(crate) lost_updates: u64,
    /// Times a worker found another inside the critical section.
    pub(crate) exclusion_violations: u64,
    /// Grants timestamped before the previous holder's release returned (a scheduling race in
    /// taking the timestamps, counted as a zero gap).
    pub(crate) reordered_timestamps: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

/// One grant as a worker saw it.
#[derive(Debug, Clone, Copy)]
struct WorkerGrant {
    worker: usize,
    granted: Instant,
    /// When the holder called release.
    release_called: Instant,
    /// When the release returned.
    released: Instant,
    held: Duration,
    measured: bool,
}

/// The critical section's shared state.
#[derive(Default)]
struct Shared {
    inside: AtomicBool,
    counter: AtomicU64,
    violations: AtomicU64,
}

struct WorkerResult {
    grants: Vec<WorkerGrant>,
    errors: u64,
    first_error: Option<String>,
}

/// Runs `workers` workers of `contender` on the one name `name`.
pub(crate) async fn run(
    label: &str,
    contender: Contender,
    name: &str,
    workers: usize,
    hold: Duration,
    timing: Timing,
    probe: &mut Probe,
) -> Result<HandoffRun, String> {
    let name: Arc<str> = Arc::from(name);
    let shared = Arc::new(Shared::default());
    let measured = window::measure(
        &format!("S3 {label}"),
        workers,
        |worker, phase| {
            let (contender, name) = (contender.clone(), Arc::clone(&name));
            let shared = Arc::clone(&shared);
            async move { work(worker, &contender, &name, hold, &phase, &shared).await }
        },
        timing,
        FINISH_WITHIN,
        probe,
    )
    .await?;
    let seconds = measured.seconds;

    let mut grants = Vec::new();
    let mut per_worker = vec![0; workers];
    let (mut errors, mut first_error) = (0, None);
    for (worker, result) in measured.results.into_iter().enumerate() {
        per_worker[worker] = result.grants.len() as u64;
        grants.extend(result.grants);
        errors += result.errors;
        first_error = first_error.or(result.first_error);
    }
    grants.sort_by_key(|g| g.granted);
    let handoffs = handoffs(&grants);
    let acquisitions = grants.iter().filter(|g| g.measured).count() as u64;
    let total_acquisitions = grants.len() as u64;
    let counter = shared.counter.load(Ordering::Acquire);
    let mut holds: Vec<u64> = grants
        .iter()
        .filter(|g| g.measured)
        .map(|g| nanos(g.held))
        .collect();
    let (mut gaps, mut gaps_from_call) = (handoffs.gaps, handoffs.gaps_from_call);
    Ok(HandoffRun {
        client: label.to_owned(),
        workers,
        hold_ms: hold.as_secs_f64() * 1e3,
        acquisitions,
        seconds,
        per_second: acquisitions as f64 / seconds,
        gap: Latency::from_nanos(&mut gaps),
        gap_from_call: Latency::from_nanos(&mut gaps_from_call),
        self_handoff: crate::stats::ratio(handoffs.own as f64, handoffs.total as f64),
        hold: Latency::from_nanos(&mut holds),
        cost: measured.delta.cost(acquisitions),
        per_worker,
        total_acquisitions,
        counter,
        lost_updates: total_acquisitions.saturating_sub(counter),
        exclusion_violations: shared.violations.load(Ordering::Acquire),
        reordered_timestamps: handoffs.reordered,
        errors,
        first_error,
    })
}

struct Handoffs {
    gaps: Vec<u64>,
    gaps_from_call: Vec<u64>,
    own: u64,
    total: u64,
    reordered: u64,
}

/// Each measured grant after the first is a handoff from the grant before it (the lock is
/// exclusive, so grants are totally ordered): its gap, and whether the same worker won.
fn handoffs(sorted: &[WorkerGrant]) -> Handoffs {
    let mut out = Handoffs {
        gaps: Vec::with_capacity(sorted.len()),
        gaps_from_call: Vec::with_capacity(sorted.len()),
        own: 0,
        total: 0,
        reordered: 0,
    };
    for pair in sorted.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        if !next.measured {
            continue;
        }
        out.total += 1;
        if prev.worker == next.worker {
            out.own += 1;
        }
        // A grant stamped before the previous release call can only be a race in taking the
        // timestamps (the lock is exclusive): a zero gap.
        out.gaps_from_call.push(nanos(
            next.granted.saturating_duration_since(prev.release_called),
        ));
        match next.granted.checked_duration_since(prev.released) {
            Some(gap) => out.gaps.push(nanos(gap)),
            None => {
                out.reordered += 1;
                out.gaps.push(0);
            }
        }
    }
    out
}

async fn work(
    worker: usize,
    contender: &Contender,
    name: &Arc<str>,
    hold: Duration,
    phase: &Phase,
    shared: &Shared,
) -> WorkerResult {
    let mut out = WorkerResult {
        grants: Vec::with_capacity(16_384),
        errors: 0,
        first_error: None,
    };
    for _ in 0..MAX_ACQUISITIONS_PER_WORKER {
        if phase.stopped() {
            break;
        }
        let held = match contender.acquire(name).await {
            Ok(held) => held,
            Err(error) => {
                out.errors += 1;
                out.first_error.get_or_insert(error);
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let granted = Instant::now();
        let measured = phase.measuring();
        // The critical section: a read-modify-write spread over the hold, so two holders at
        // once would lose an increment.
        if shared.inside.swap(true, Ordering::AcqRel) {
            shared.violations.fetch_add(1, Ordering::AcqRel);
        }
        let value = shared.counter.load(Ordering::Acquire);
        tokio::time::sleep(hold).await;
        shared.counter.store(value + 1, Ordering::Release);
        shared.inside.store(false, Ordering::Release);
        let release_called = Instant::now();
        let held_for = release_called - granted;
        if let Err(error) = contender.release(name, held).await {
            out.errors += 1;
            out.first_error.get_or_insert(error);
        }
        out.grants.push(WorkerGrant {
            worker,
            granted,
            release_called,
            released: Instant::now(),
            held: held_for,
            measured,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoffs_pair_each_grant_with_the_previous_release() {
        let t = Instant::now();
        let us = |n| t + Duration::from_micros(n);
        let grant = |worker, granted, released, measured| WorkerGrant {
            worker,
            granted: us(granted),
            release_called: us(released - 40),
            released: us(released),
            held: Duration::ZERO,
            measured,
        };
        let grants = [
            grant(0, 0, 1000, false),
            grant(1, 1100, 2100, true),
            grant(1, 2150, 3000, true),
            grant(2, 2990, 4000, true),
        ];
        let h = handoffs(&grants);
        assert_eq!(h.gaps, vec![100_000, 50_000, 0]);
        assert_eq!(h.gaps_from_call, vec![140_000, 90_000, 30_000]);
        assert_eq!((h.own, h.total, h.reordered), (1, 3, 1));
    }
}
