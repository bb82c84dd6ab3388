//! S6: 1,000 waiters in one process queue for one name held by another process (a second
//! `RedisLock` with its own connections stands in for it). When the holder releases, the
//! waiters take the lock one after another. Measures how many subscriptions the waiting costs
//! the server and how many round trips each handoff takes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use serde::Serialize;
use tokio::time::Instant;

use crate::info::{Cost, Probe};

/// How long every waiter may wait in all (far more than 1,000 handoffs take).
const WAIT: Duration = Duration::from_secs(60);

/// How often subscriptions are sampled while the waiters wait and take the lock.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// The name they all want.
const NAME: &str = "s6:one-name";

/// Commands that are a round trip of their own (every distlock operation is one EVALSHA).
const ROUND_TRIP_COMMANDS: [&str; 5] = [
    "evalsha",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
];

/// The result of S6.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WaitersRun {
    pub(crate) waiters: usize,
    /// Waiters that got the lock (all of them, or something is wrong).
    pub(crate) acquired: u64,
    /// From the remote holder's release to the last waiter's release.
    pub(crate) seconds: f64,
    pub(crate) handoffs_per_second: f64,
    /// Subscribers of the name's release channel (`PUBSUB NUMSUB`), most seen at one sample.
    pub(crate) max_channel_subscribers: u64,
    /// Connections in pub/sub mode (`CLIENT LIST TYPE pubsub`), most seen at one sample.
    pub(crate) max_pubsub_connections: usize,
    /// SUBSCRIBE commands the server ran while the waiters waited and took the lock.
    pub(crate) subscribe_commands: u64,
    /// EVALSHA and (UN)SUBSCRIBE calls per handoff.
    pub(crate) round_trips_per_handoff: f64,
    /// Every command per handoff.
    pub(crate) cost: Cost,
    pub(crate) lost_updates: u64,
    pub(crate) exclusion_violations: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

/// Runs S6 with `waiters` waiters on the server at `url`.
pub(crate) async fn run(
    url: &str,
    waiters: usize,
    probe: &mut Probe,
) -> Result<WaitersRun, String> {
    let err = |e: lock_core::LockError| e.to_string();
    let lock = Arc::new(RedisLock::from_url(url).map_err(err)?);
    let channel = lock.release_channel(NAME);
    let local = Locker::from_arc(lock);
    let remote = Locker::new(RedisLock::from_url(url).map_err(err)?);

    let holder = remote.lock(NAME).acquire().await.map_err(err)?;
    let before = probe.snapshot().await.map_err(|e| e.to_string())?;

    let asked = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..waiters)
        .map(|_| {
            let local = local.clone();
            let (asked, done) = (Arc::clone(&asked), Arc::clone(&done));
            let (inside, counter, violations) = (
                Arc::clone(&inside),
                Arc::clone(&counter),
                Arc::clone(&violations),
            );
            tokio::spawn(async move {
                let request = local.lock(NAME).wait(WAIT);
                asked.fetch_add(1, Ordering::AcqRel);
                let result = request.acquire().await;
                let outcome = match result {
                    Ok(guard) => {
                        if inside.swap(true, Ordering::AcqRel) {
                            violations.fetch_add(1, Ordering::AcqRel);
                        }
                        let value = counter.load(Ordering::Acquire);
                        tokio::task::yield_now().await;
                        counter.store(value + 1, Ordering::Release);
                        inside.store(false, Ordering::Release);
                        guard.release().await.map(|_| ()).map_err(|e| e.to_string())
                    }
                    Err(e) => Err(e.to_string()),
                };
                done.fetch_add(1, Ordering::AcqRel);
                outcome
            })
        })
        .collect();

    // Let every waiter join the line and the head subscribe (bounded), sampling meanwhile.
    let (mut max_subs, mut max_conns) = (0, 0);
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_secs(5)
        && (asked.load(Ordering::Acquire) < waiters
            || settle.elapsed() < Duration::from_millis(200))
    {
        tokio::time::sleep(SAMPLE_EVERY).await;
        max_subs = max_subs.max(probe.numsub(&channel).await.map_err(|e| e.to_string())?);
        max_conns = max_conns.max(probe.pubsub_clients().await.map_err(|e| e.to_string())?);
    }

    let started = Instant::now();
    holder.release().await.map_err(err)?;
    while done.load(Ordering::Acquire) < waiters && started.elapsed() < WAIT {
        max_subs = max_subs.max(probe.numsub(&channel).await.map_err(|e| e.to_string())?);
        max_conns = max_conns.max(probe.pubsub_clients().await.map_err(|e| e.to_string())?);
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let (mut acquired, mut errors, mut first_error) = (0u64, 0u64, None);
    for handle in handles {
        match tokio::time::timeout(Duration::from_secs(5), handle).await {
            Ok(Ok(Ok(()))) => acquired += 1,
            Ok(Ok(Err(e))) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
            Ok(Err(e)) => {
                errors += 1;
                first_error.get_or_insert(format!("a waiter task failed: {e}"));
            }
            Err(_) => {
                errors += 1;
                first_error.get_or_insert("a waiter did not finish".to_owned());
            }
        }
    }
    // Wait for the unsubscribe of the emptied line to reach the server before counting.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after = probe.snapshot().await.map_err(|e| e.to_string())?;
    let round_trips: u64 = ROUND_TRIP_COMMANDS
        .iter()
        .map(|c| before.calls_until(&after, c))
        .sum();
    Ok(WaitersRun {
        waiters,
        acquired,
        seconds,
        handoffs_per_second: acquired as f64 / seconds,
        max_channel_subscribers: max_subs,
        max_pubsub_connections: max_conns,
        subscribe_commands: before.calls_until(&after, "subscribe"),
        round_trips_per_handoff: crate::stats::ratio(round_trips as f64, acquired as f64),
        cost: before.cost_until(&after, acquired),
        lost_updates: acquired.saturating_sub(counter.load(Ordering::Acquire)),
        exclusion_violations: violations.load(Ordering::Acquire),
        errors,
        first_error,
    })
}
