//! Clients contending for one lock for a while, and what they saw: grants, failures, latency,
//! whether two ever held it at once, and whether fencing tokens ever went backwards.

use std::collections::BTreeMap;
use std::error::Error as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use distlock::{LockError, Locker, redlock::QuorumNotReached};
use tokio::time::Instant;

/// The lock every client takes.
pub(crate) const LOCK: &str = "ledger";
/// Its TTL; a crashed node must stay down longer than this before rejoining.
pub(crate) const TTL: Duration = Duration::from_secs(2);
/// How long one client waits for the lock per attempt.
const WAIT: Duration = Duration::from_secs(2);
/// How long a holder "works" under the lock.
const WORK: Duration = Duration::from_millis(5);

/// What the clients share, to check each other.
#[derive(Default)]
struct Witness {
    inside: AtomicUsize,
    overlaps: AtomicUsize,
    last_fence: AtomicU64,
    fence_backwards: AtomicUsize,
}

/// What one phase saw.
#[derive(Debug, Default)]
pub(crate) struct Phase {
    pub(crate) granted: usize,
    /// Failed acquires by kind.
    pub(crate) failed: BTreeMap<String, usize>,
    latencies: Vec<Duration>,
    pub(crate) overlaps: usize,
    pub(crate) fence_backwards: usize,
    pub(crate) last_fence: u64,
}

impl Phase {
    pub(crate) fn failures(&self) -> usize {
        self.failed.values().sum()
    }

    /// The median acquire latency of the granted attempts.
    pub(crate) fn p50(&self) -> Option<Duration> {
        let mut l = self.latencies.clone();
        l.sort_unstable();
        l.get(l.len() / 2).copied()
    }
}

/// Runs every client in a loop for `duration`: acquire, check, work, release.
pub(crate) async fn run(lockers: &[Locker], duration: Duration, fence_floor: u64) -> Phase {
    let witness = Arc::new(Witness {
        last_fence: AtomicU64::new(fence_floor),
        ..Witness::default()
    });
    let deadline = Instant::now() + duration;
    let tasks: Vec<_> = lockers
        .iter()
        .map(|locker| tokio::spawn(client(locker.clone(), Arc::clone(&witness), deadline)))
        .collect();
    let mut phase = Phase::default();
    for task in tasks {
        let Ok(seen) = task.await else {
            *phase.failed.entry("client panicked".into()).or_default() += 1;
            continue;
        };
        phase.granted += seen.granted;
        phase.latencies.extend(seen.latencies);
        for (kind, n) in seen.failed {
            *phase.failed.entry(kind).or_default() += n;
        }
    }
    phase.overlaps = witness.overlaps.load(Ordering::SeqCst);
    phase.fence_backwards = witness.fence_backwards.load(Ordering::SeqCst);
    phase.last_fence = witness.last_fence.load(Ordering::SeqCst);
    phase
}

async fn client(locker: Locker, witness: Arc<Witness>, deadline: Instant) -> Phase {
    let mut seen = Phase::default();
    while Instant::now() < deadline {
        let started = Instant::now();
        match locker.lock(LOCK).fixed_ttl(TTL).wait(WAIT).await {
            Ok(guard) => {
                seen.granted += 1;
                seen.latencies.push(started.elapsed());
                if witness.inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    witness.overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let fence = guard.fencing_token();
                if witness.last_fence.fetch_max(fence, Ordering::SeqCst) >= fence {
                    witness.fence_backwards.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(WORK).await;
                witness.inside.fetch_sub(1, Ordering::SeqCst);
                if let Err(error) = guard.release().await {
                    *seen
                        .failed
                        .entry(format!("release: {}", kind(&error)))
                        .or_default() += 1;
                }
            }
            Err(error) => {
                *seen.failed.entry(kind(&error)).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    seen
}

/// A short description of a failed acquire.
pub(crate) fn kind(error: &LockError) -> String {
    match error
        .source()
        .and_then(|s| s.downcast_ref::<QuorumNotReached>())
    {
        Some(q) => format!(
            "quorum not reached: {} granted, {} needed; {} refused, {} failed or timed out",
            q.granted, q.required, q.refused, q.failed
        ),
        None => error.to_string(),
    }
}
