//! One point of the waiters' cost curve (C2): S6's shape at a given number of waiters. The
//! waiters queue in one process (one `Locker`) for a name that another lock instance, its own
//! connections standing in for another process, holds; when it releases, they take the lock
//! one after another, each releasing at once. Unlike S6 this measures each release: the store's
//! commands per release, the time from a release call to the next grant, and how many waiters
//! a release woke (grant attempts and busy answers, [`crate::counted`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::Locker;
use lock_core::backend::Lock;
use serde::Serialize;
use tokio::time::Instant;

use crate::counted::Counted;
use crate::info::Probe;
use crate::stats::{Latency, nanos, ratio};

/// How long any waiter may wait in all.
const WAIT: Duration = Duration::from_secs(120);

/// Client CPU in all below which its figure per release is left out of charts and verdicts:
/// five of `/proc`'s 10 ms ticks.
pub(crate) const CPU_RESOLVED_S: f64 = 0.05;

/// How long the waiters get to join the line before the holder releases.
const SETTLE: Duration = Duration::from_secs(20);

/// One point: `waiters` waiters on one name.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WaitersPoint {
    pub(crate) waiters: usize,
    /// Waiters that got the lock (all of them, or something is wrong).
    pub(crate) acquired: u64,
    /// Releases in the measured phase: the remote holder's and every waiter's but the last
    /// (whose release wakes nobody).
    pub(crate) releases: u64,
    /// From the remote holder's release to the last waiter's grant.
    pub(crate) seconds: f64,
    /// Store commands (Redis: `INFO commandstats`, script-internal ones counted too;
    /// PostgreSQL: statements; etcd: gRPC messages) while the waiters joined, per waiter.
    pub(crate) join_commands_per_waiter: f64,
    /// Store commands from the first release to the last grant, per release.
    pub(crate) commands_per_release: f64,
    /// Time from a release call to the next grant.
    pub(crate) gap: Latency,
    /// Grant attempts per release (waiters woken that asked the store).
    pub(crate) attempts_per_release: f64,
    /// Busy answers per release (waiters woken for nothing).
    pub(crate) busy_per_release: f64,
    /// Share of the grants passed straight to a local waiter (hand-over).
    pub(crate) handover_share: f64,
    /// Store CPU per release, µs.
    pub(crate) server_cpu_us_per_release: f64,
    /// Wall time per release (the phase over the releases), µs.
    pub(crate) us_per_release: f64,
    /// CPU of this process (the waiters' `Locker`, all its threads) per release, µs, and in
    /// all, seconds (read in 10 ms ticks: below a few ticks the figure per release is noise).
    pub(crate) client_cpu_us_per_release: f64,
    pub(crate) client_cpu_s: f64,
    pub(crate) exclusion_violations: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

impl WaitersPoint {
    /// Client CPU per release, µs, or 0 (left out) when too little was spent to resolve it.
    pub(crate) fn resolved_client_cpu_us(&self) -> f64 {
        if self.client_cpu_s >= CPU_RESOLVED_S {
            self.client_cpu_us_per_release
        } else {
            0.0
        }
    }
}

/// One grant: when it came and when its holder called release.
#[derive(Clone, Copy)]
struct Held {
    granted: Instant,
    release_called: Instant,
}

/// Runs one point: `local` is the waiters' lock, `remote` the holder's (its own connections),
/// `probe` the store's counters.
pub(crate) async fn point(
    local: Arc<dyn Lock>,
    remote: Arc<dyn Lock>,
    name: &str,
    waiters: usize,
    probe: &mut Probe,
) -> Result<WaitersPoint, String> {
    let err = |e: lock_core::LockError| e.to_string();
    let woken = Arc::new(Counted::new(local));
    let locker = Locker::from_arc(Arc::clone(&woken) as Arc<dyn Lock>);
    let holder = Locker::from_arc(remote)
        .lock(name)
        .acquire()
        .await
        .map_err(err)?;
    let before_join = probe.snapshot().await.map_err(|e| e.to_string())?;

    let asked = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(AtomicUsize::new(0));
    let held = Arc::new(Mutex::new(Vec::with_capacity(waiters)));
    let handles: Vec<_> = (0..waiters)
        .map(|_| {
            let locker = locker.clone();
            let name = name.to_owned();
            let (asked, inside, violations, held) = (
                Arc::clone(&asked),
                Arc::clone(&inside),
                Arc::clone(&violations),
                Arc::clone(&held),
            );
            tokio::spawn(async move {
                let request = locker.lock(name).wait(WAIT);
                asked.fetch_add(1, Ordering::AcqRel);
                let guard = request.acquire().await.map_err(|e| e.to_string())?;
                let granted = Instant::now();
                if inside.swap(true, Ordering::AcqRel) {
                    violations.fetch_add(1, Ordering::AcqRel);
                }
                tokio::task::yield_now().await;
                inside.store(false, Ordering::Release);
                let release_called = Instant::now();
                held.lock().unwrap_or_else(|e| e.into_inner()).push(Held {
                    granted,
                    release_called,
                });
                guard.release().await.map(|_| ()).map_err(|e| e.to_string())
            })
        })
        .collect();

    // Every waiter asks, then the line settles (the head's busy attempt and subscription).
    let settle = Instant::now();
    while settle.elapsed() < SETTLE
        && (asked.load(Ordering::Acquire) < waiters
            || settle.elapsed() < Duration::from_millis(300))
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = probe.snapshot().await.map_err(|e| e.to_string())?;
    let asked_before = woken.asked();

    let cpu0 = crate::procfs::cpu_time();
    let started = Instant::now();
    let first_release = Instant::now();
    holder.release().await.map_err(err)?;
    let (mut errors, mut first_error) = (0u64, None);
    for handle in handles {
        let left = WAIT.saturating_sub(started.elapsed()) + Duration::from_secs(5);
        let outcome = match tokio::time::timeout(left, handle).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(format!("a waiter task failed: {e}")),
            Err(_) => Err("a waiter did not finish".to_owned()),
        };
        if let Err(e) = outcome {
            errors += 1;
            first_error.get_or_insert(e);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let client_cpu = crate::procfs::cpu_time().saturating_sub(cpu0);
    let asked_in = asked_before.until(woken.asked());
    let after = probe.snapshot().await.map_err(|e| e.to_string())?;

    let mut grants = held.lock().unwrap_or_else(|e| e.into_inner()).clone();
    grants.sort_by_key(|h| h.granted);
    // Grants are totally ordered (one holder at a time): each came after the release call
    // of the grant before it, the first after the remote holder's.
    let mut gaps: Vec<u64> = std::iter::once(first_release)
        .chain(grants.iter().map(|h| h.release_called))
        .zip(grants.iter().map(|h| h.granted))
        .map(|(release, grant)| nanos(grant.saturating_duration_since(release)))
        .collect();
    let acquired = grants.len() as u64;
    // Every grant followed one release; the last waiter's release wakes nobody.
    let releases = acquired.max(1) as f64;
    let join = before_join.until(&before);
    let phase = before.until(&after);
    Ok(WaitersPoint {
        waiters,
        acquired,
        releases: acquired,
        seconds,
        join_commands_per_waiter: ratio(join.total_calls() as f64, waiters as f64),
        commands_per_release: phase.total_calls() as f64 / releases,
        gap: Latency::from_nanos(&mut gaps),
        attempts_per_release: asked_in.attempts as f64 / releases,
        busy_per_release: asked_in.busy as f64 / releases,
        handover_share: asked_in.handovers as f64 / releases,
        server_cpu_us_per_release: phase.cost(acquired.max(1)).server_cpu_us_per_op,
        us_per_release: seconds * 1e6 / releases,
        client_cpu_us_per_release: client_cpu.as_secs_f64() * 1e6 / releases,
        client_cpu_s: client_cpu.as_secs_f64(),
        exclusion_violations: violations.load(Ordering::Acquire) as u64,
        errors,
        first_error,
    })
}
