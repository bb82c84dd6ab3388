//! Local handoff: a guard released while another task of the process waits for the name hands
//! the lock over in one backend step, with a greater fencing token; every
//! `MAX_LOCAL_HANDOFFS + 1`-th release is a plain one (so other processes get a turn); a
//! handover nobody takes is released; exclusion holds throughout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::common::{Probe, slow_polling_locker};
use lock_core::{Guard, LockError, Locker, MemoryLock};
use tokio::task::JoinHandle;
use tokio::time::sleep;

const MS: Duration = Duration::from_millis(1);
const LONG: Duration = Duration::from_secs(60);

/// A task that waits (up to a minute) for "a" with `ttl`, after the tasks spawned before it.
async fn spawn_waiter(locker: &Locker, ttl: Duration) -> JoinHandle<Result<Guard, LockError>> {
    let locker = locker.clone();
    let waiter = tokio::spawn(async move { locker.lock("a").fixed_ttl(ttl).wait(LONG).await });
    sleep(MS).await; // it is in line
    waiter
}

fn handing_probe() -> Arc<Probe> {
    let probe = Arc::new(Probe::default());
    probe.hands_over.store(true, Ordering::SeqCst);
    probe
}

#[tokio::test(start_paused = true)]
async fn a_release_hands_the_lock_to_the_waiting_task_in_one_step() {
    let probe = handing_probe();
    let locker = slow_polling_locker(&probe);
    let holder = locker.lock("a").fixed_ttl(LONG).await.expect("free");
    let first_fence = holder.fencing_token();
    let waiter = spawn_waiter(&locker, Duration::from_secs(7)).await;
    let attempts_before = probe.count(&probe.attempts);
    holder.release().await.expect("release");
    let next = waiter.await.expect("no panic").expect("handed over");
    assert_eq!(probe.count(&probe.handovers), 1, "one handover");
    assert_eq!(probe.count(&probe.releases), 0, "no release was sent");
    assert_eq!(
        probe.count(&probe.attempts),
        attempts_before,
        "the waiter sent no attempt"
    );
    assert!(
        next.fencing_token() > first_fence,
        "a fresh, greater fencing token"
    );
    let remaining = next.remaining();
    assert!(
        remaining > Duration::from_secs(6) && remaining <= Duration::from_secs(7),
        "the waiter's own TTL: {remaining:?}"
    );
    assert_eq!(probe.inner.held_count(), 1, "held, by the waiter");
    next.release().await.expect("release");
    assert_eq!(probe.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_guard_hands_over_too() {
    let probe = handing_probe();
    let locker = slow_polling_locker(&probe);
    let holder = locker.lock("a").fixed_ttl(LONG).await.expect("free");
    let waiter = spawn_waiter(&locker, LONG).await;
    drop(holder);
    let next = waiter.await.expect("no panic").expect("handed over");
    assert_eq!(probe.count(&probe.handovers), 1);
    assert_eq!(probe.count(&probe.releases), 0);
    drop(next);
    sleep(MS).await;
    assert_eq!(probe.inner.held_count(), 0, "the last guard released it");
}

#[tokio::test(start_paused = true)]
async fn without_a_waiter_a_release_is_a_release() {
    let probe = handing_probe();
    let locker = slow_polling_locker(&probe);
    let holder = locker.lock("a").fixed_ttl(LONG).await.expect("free");
    holder.release().await.expect("release");
    assert_eq!(probe.count(&probe.handovers), 0);
    assert_eq!(probe.count(&probe.releases), 1);
}

#[tokio::test(start_paused = true)]
async fn every_ninth_release_is_plain_so_other_processes_get_a_turn() {
    let probe = handing_probe();
    let locker = slow_polling_locker(&probe);
    let grants = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let (locker, grants) = (locker.clone(), Arc::clone(&grants));
        tasks.push(tokio::spawn(async move {
            for _ in 0..12 {
                let guard = locker
                    .lock("a")
                    .fixed_ttl(LONG)
                    .wait(LONG)
                    .await
                    .expect("granted");
                grants.fetch_add(1, Ordering::SeqCst);
                sleep(MS).await;
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("no panic");
    }
    assert_eq!(grants.load(Ordering::SeqCst), 36);
    let (handovers, releases) = (probe.count(&probe.handovers), probe.count(&probe.releases));
    assert_eq!(handovers + releases, 36, "each grant ended once");
    // Runs of at most 8 handoffs, each ended by a plain release: 36 / 9 = 4 at least.
    assert!(
        releases >= 4,
        "{releases} plain releases, {handovers} handovers"
    );
    assert!(
        handovers >= 24,
        "the line was served by handoffs: {handovers}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_handover_the_waiter_no_longer_wants_is_released() {
    let probe = handing_probe();
    *probe.handover_delay.lock().expect("lock") = Duration::from_millis(50);
    let locker = slow_polling_locker(&probe);
    let holder = locker.lock("a").fixed_ttl(LONG).await.expect("free");
    let waiter = spawn_waiter(&locker, LONG).await;
    let release = tokio::spawn(holder.release());
    sleep(Duration::from_millis(10)).await; // the handover is applied, its answer is on its way
    waiter.abort();
    assert!(waiter.await.is_err(), "the waiter was cancelled");
    release.await.expect("no panic").expect("release");
    sleep(MS).await;
    assert_eq!(probe.count(&probe.handovers), 1);
    assert_eq!(
        probe.inner.held_count(),
        0,
        "the lease handed to nobody was released"
    );
}

#[tokio::test(start_paused = true)]
async fn exclusion_holds_with_handoffs_among_many_tasks() {
    let locker = Locker::new(MemoryLock::new());
    let inside = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (locker, inside, counter) = (locker.clone(), Arc::clone(&inside), Arc::clone(&counter));
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                let guard = locker.lock("x").wait(LONG).await.expect("granted");
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                let seen = counter.load(Ordering::SeqCst);
                sleep(MS).await;
                counter.store(seen + 1, Ordering::SeqCst);
                inside.store(false, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("no panic");
    }
    assert_eq!(counter.load(Ordering::SeqCst), 320, "no lost update");
}

/// Real threads, real time: a handoff that lands while the next waiter is between looking for
/// a handed lease and reading its wake-up signal must still wake it. (Missed, the waiter
/// slept until the handed lease's validity: 60 s here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_handoff_is_missed_under_real_concurrency() {
    let locker = Locker::builder(MemoryLock::new())
        .lease(Duration::from_secs(60))
        .build();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let locker = locker.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..1500 {
                let guard = locker
                    .lock("hot")
                    .wait(Duration::from_secs(5))
                    .await
                    .expect("granted well within 5 s: no wake-up lost");
                tokio::task::yield_now().await;
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("no panic");
    }
}

/// A handover whose answer was lost after the store applied it is undone (the new token's
/// grant released) and the lock released: the waiter then gets it by its own attempt at once,
/// not after the handed-over grant's TTL. A handover refused before any change sends no such
/// release.
#[tokio::test(start_paused = true)]
async fn a_failed_handover_is_undone_only_when_it_may_have_applied() {
    let probe = handing_probe();
    let locker = Locker::new(Arc::clone(&probe));
    *probe.handover_fails.lock().expect("lock") = Some(true);
    let holder = locker.lock("a").fixed_ttl(LONG).await.expect("free");
    let waiter = spawn_waiter(&locker, LONG).await;
    // The store already moved the lock to the new token: the holder's own release finds it
    // not owned, and the new token's grant is released in the background.
    let released = holder.release().await;
    assert!(
        matches!(released, Ok(()) | Err(LockError::NotOwned { .. })),
        "{released:?}"
    );
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("granted long before the handed grant's minute")
        .expect("no panic")
        .expect("granted");
    *probe.handover_fails.lock().expect("lock") = Some(false);
    let waiter = spawn_waiter(&locker, LONG).await;
    let releases = probe.count(&probe.releases);
    next.release().await.expect("released instead");
    let last = waiter.await.expect("no panic").expect("granted");
    assert_eq!(
        probe.count(&probe.releases),
        releases + 1,
        "one release, the holder's: nothing to undo after a refusal"
    );
    last.release().await.expect("ours");
}
