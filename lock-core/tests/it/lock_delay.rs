//! Lock-delay in the Locker, beyond the conformance module's rules: a holder past its validity
//! does not free the name by releasing it (it may be a paused one, whose requests are still on
//! their way), a hand-over to a local waiter is a release (no delay), a backend whose locks end
//! with their connection refuses it, and a lease plus delay past `MAX_TTL` is bad input.
//! Tokio's paused clock makes every instant exact.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::{Capabilities, Lock};
use lock_core::{LockError, Locker, MAX_TTL, MemoryLock};

use crate::common::Declaring;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_secs(1);
const DELAY: Duration = Duration::from_secs(3);

fn two_lockers() -> (Locker, Locker) {
    let store = Arc::new(MemoryLock::new());
    (
        Locker::new(Arc::clone(&store)),
        Locker::new(Arc::clone(&store)),
    )
}

/// `job` held for a fixed [`LEASE`] with a [`DELAY`].
async fn delayed(locker: &Locker) -> lock_core::Guard {
    locker
        .lock("job")
        .fixed_ttl(LEASE)
        .lock_delay(DELAY)
        .await
        .expect("free")
}

#[tokio::test(start_paused = true)]
async fn a_release_after_the_validity_leaves_the_name_to_the_delay() {
    let (holder, other) = two_lockers();
    let started = Instant::now();
    let guard = delayed(&holder).await;
    assert_eq!(
        guard.valid_until(),
        started + LEASE,
        "the holder's validity is the lease's"
    );
    // The holder was paused past its validity; woken, it releases.
    sleep(LEASE + Duration::from_millis(10)).await;
    let released = guard.release().await;
    assert!(
        matches!(released, Err(LockError::NotOwned { .. })),
        "a release past the validity answers not-owned: {released:?}"
    );
    let busy = other.lock("job").try_acquire().await.expect("answers");
    assert!(
        busy.is_none(),
        "the late release freed the name inside its lock-delay"
    );
    let next = other
        .lock("job")
        .wait(DELAY * 2)
        .await
        .expect("free after the delay");
    assert!(
        Instant::now() >= started + LEASE + DELAY,
        "granted {:?} after the first request, before lease + delay",
        started.elapsed()
    );
    next.release().await.expect("ours");
}

#[tokio::test(start_paused = true)]
async fn a_release_within_the_validity_frees_the_name_at_once() {
    let (holder, other) = two_lockers();
    let guard = delayed(&holder).await;
    sleep(LEASE / 2).await;
    guard.release().await.expect("ours");
    let next = other.lock("job").try_acquire().await.expect("answers");
    assert!(
        next.is_some(),
        "a release inside the validity left the name busy"
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_guard_past_its_validity_is_not_released() {
    let (holder, other) = two_lockers();
    let started = Instant::now();
    let guard = delayed(&holder).await;
    sleep(LEASE + Duration::from_millis(10)).await;
    drop(guard);
    sleep(Duration::from_millis(10)).await; // the background release, had there been one
    assert!(
        other
            .lock("job")
            .try_acquire()
            .await
            .expect("answers")
            .is_none(),
        "a guard dropped past its validity freed the name inside its lock-delay"
    );
    let next = other.lock("job").wait(DELAY * 2).await.expect("later");
    assert!(Instant::now() >= started + LEASE + DELAY);
    next.release().await.expect("ours");
}

#[tokio::test(start_paused = true)]
async fn a_local_waiter_is_handed_the_lock_at_once() {
    let store = Arc::new(MemoryLock::new());
    let locker = Locker::new(store);
    let guard = locker.lock("job").lock_delay(DELAY).await.expect("free");
    let waiter = tokio::spawn({
        let locker = locker.clone();
        async move {
            let asked = Instant::now();
            let next = locker
                .lock("job")
                .lock_delay(DELAY)
                .wait(Duration::from_secs(5))
                .await
                .expect("handed over");
            let waited = asked.elapsed();
            // The successor's own validity is its lease, not its lease plus its delay.
            assert!(next.remaining() <= lock_core::DEFAULT_LEASE);
            next.release().await.expect("ours");
            waited
        }
    });
    sleep(Duration::from_millis(100)).await;
    guard.release().await.expect("ours");
    let waited = waiter.await.expect("the waiter");
    assert!(
        waited < Duration::from_millis(200),
        "the local waiter waited {waited:?}: a release is no expiry, no delay applies"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_plus_delay_past_the_largest_ttl_is_bad_input() {
    let (locker, _) = two_lockers();
    let answer = locker
        .lock("job")
        .fixed_ttl(MAX_TTL)
        .lock_delay(Duration::from_millis(1))
        .try_acquire()
        .await;
    assert!(
        matches!(&answer, Err(LockError::InvalidInput { reason }) if reason.contains("lock-delay")),
        "{answer:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_backend_without_lock_delay_refuses_it_before_any_call() {
    // A backend whose locks end with their connection (an advisory lock).
    let lock = Arc::new(Declaring::new(
        "session",
        Capabilities::MUTEX.with_lock_delay(false),
    ));
    let locker = Locker::from_arc(Arc::clone(&lock) as Arc<dyn Lock>);
    let answer = locker.lock("job").lock_delay(DELAY).try_acquire().await;
    assert!(
        matches!(
            &answer,
            Err(LockError::Unsupported {
                backend: "session",
                kind: "lock-delayed"
            })
        ),
        "{answer:?}"
    );
    assert_eq!(
        lock.attempts.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing was sent"
    );
    // Without a delay the same backend grants.
    let guard = locker.lock("job").try_acquire().await.expect("answers");
    assert!(guard.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_failed_leader_leaves_the_election_empty_for_the_delay() {
    let (first, second) = two_lockers();
    let started = Instant::now();
    let leadership = first
        .elect("scheduler")
        .lease(LEASE)
        .lock_delay(DELAY)
        .campaign()
        .await
        .expect("elected");
    assert!(leadership.lease_watch().valid_until() <= started + LEASE);
    // The leader's process dies: nothing resigns, nothing renews.
    let _kept = leadership.leak();
    let next = second
        .elect("scheduler")
        .lease(LEASE)
        .campaign()
        .await
        .expect("elected after the delay");
    assert!(
        Instant::now() >= started + LEASE + DELAY,
        "the next leader was elected {:?} after the first's campaign",
        started.elapsed()
    );
    assert!(next.term() > 0);
}

/// A leadership taken back after a restart (`Election::resume`) keeps the election's
/// lock-delay: when the resumed leader dies too, the next one waits out lease and delay from
/// the resume.
#[tokio::test(start_paused = true)]
async fn a_resumed_leader_that_dies_leaves_the_election_empty_for_the_delay() {
    let (first, second) = two_lockers();
    let election = || first.elect("scheduler").lease(LEASE).lock_delay(DELAY);
    let kept = election().campaign().await.expect("elected").leak();
    let resumed_at = Instant::now();
    let resumed = election().resume(kept).await.expect("resumed");
    // The resumed leader's process dies in turn.
    let _kept = resumed.leak();
    let _next = second
        .elect("scheduler")
        .lease(LEASE)
        .campaign()
        .await
        .expect("elected after the delay");
    assert!(
        Instant::now() >= resumed_at + LEASE + DELAY,
        "the next leader was elected {:?} after the resume",
        resumed_at.elapsed()
    );
}
