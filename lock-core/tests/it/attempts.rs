//! One attempt's bookkeeping in the Locker: which grant a backend is asked for (renewed or of a
//! fixed TTL), and what is cleaned up after a failed attempt — the attempted token released
//! when the failure may have applied (a timeout after the store took the grant), nothing sent
//! when the store is known to have applied nothing (a quorum not reached), and nothing sent for
//! a busy mutex's attempts (only the kinds that queue keep their waiter's token).

use std::sync::Arc;
use std::time::Duration;

use lock_core::{LockError, Locker};
use tokio::time::Instant;

use crate::common::{Failing, Failure};

/// A renewed request asks the backend for a renewed grant, a fixed one for a plain grant (etcd
/// puts them on different leases).
#[tokio::test(start_paused = true)]
async fn a_renewed_request_asks_for_a_renewed_grant_and_a_fixed_one_for_a_plain_grant() {
    let store = Failing::new();
    let locker = Locker::new(Arc::clone(&store));
    let renewed = locker.lock("renewed").await.expect("free");
    assert_eq!(
        (store.count(&store.renewed), store.count(&store.plain)),
        (1, 0)
    );
    let fixed = locker
        .lock("fixed")
        .fixed_ttl(Duration::from_secs(5))
        .await
        .expect("free");
    assert_eq!(
        (store.count(&store.renewed), store.count(&store.plain)),
        (1, 1)
    );
    // A granted attempt leaves nothing armed behind it: no release is sent while held.
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(store.count(&store.releases), 0);
    renewed.release().await.expect("ours");
    fixed.release().await.expect("ours");
}

/// An attempt whose answer was lost after the store took the grant is undone (its token
/// released), for one name and for a multi-lock; an attempt the store is known to have refused
/// sends nothing more.
#[tokio::test(start_paused = true)]
async fn a_failed_attempt_is_released_only_when_it_may_have_applied() {
    let store = Failing::new();
    let locker = Locker::new(Arc::clone(&store));
    let fixed = Duration::from_secs(30);

    store.fail(Failure::AppliedThenTimedOut);
    let lost = locker.lock("one").fixed_ttl(fixed).try_acquire().await;
    assert!(matches!(lost, Err(LockError::Timeout { .. })), "{lost:?}");
    let lost = locker
        .lock_all(["a", "b"])
        .fixed_ttl(fixed)
        .try_acquire()
        .await;
    assert!(matches!(lost, Err(LockError::Timeout { .. })), "{lost:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    store.fail(Failure::None);
    for name in ["one", "a", "b"] {
        assert!(
            locker
                .lock(name)
                .try_acquire()
                .await
                .expect("answers")
                .is_some(),
            "{name:?} was left held by an attempt whose answer was lost"
        );
    }

    // The guards dropped above release in the background.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let releases = store.count(&store.releases);
    store.fail(Failure::NothingApplied);
    let refused = locker.lock("two").fixed_ttl(fixed).try_acquire().await;
    assert!(
        matches!(refused, Err(LockError::QuorumNotReached { .. })),
        "{refused:?}"
    );
    let refused = locker
        .lock_all(["c", "d"])
        .fixed_ttl(fixed)
        .try_acquire()
        .await;
    assert!(
        matches!(refused, Err(LockError::QuorumNotReached { .. })),
        "{refused:?}"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        store.count(&store.releases),
        releases,
        "a release was sent for attempts that took nothing"
    );
}

/// A mutex request that waits behind a holder and gives up leaves nothing to clean up: no
/// release is sent for its attempts (only the kinds that queue, fair and writer-preferring
/// writes, keep a waiter's record to take back).
#[tokio::test(start_paused = true)]
async fn a_mutex_waiter_that_gives_up_sends_no_release() {
    let store = Failing::new();
    let holder = Locker::new(Arc::clone(&store));
    let waiter = Locker::new(Arc::clone(&store));
    let held = holder.lock("job").await.expect("free");
    let releases = store.count(&store.releases);
    let gave_up = waiter.lock("job").wait(Duration::from_millis(300)).await;
    assert!(
        matches!(gave_up, Err(LockError::Timeout { .. })),
        "{gave_up:?}"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(store.count(&store.releases), releases);
    held.release().await.expect("ours");
}

/// A multi-lock that waits tries again after an error worth retrying (here until the store
/// answers), and gives up at once on one that is not (a wrong password).
#[tokio::test(start_paused = true)]
async fn a_waiting_multi_lock_retries_what_may_pass_and_not_what_will_not() {
    let store = Failing::new();
    let locker = Locker::new(Arc::clone(&store));
    store.fail(Failure::NothingApplied);
    let healer = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            store.fail(Failure::None);
        })
    };
    let all = locker
        .lock_all(["a", "b"])
        .wait(Duration::from_secs(5))
        .await
        .expect("granted once the store answers");
    healer.await.expect("task");
    all.release().await.expect("ours");

    store.fail(Failure::Refused);
    let started = Instant::now();
    let refused = locker
        .lock_all(["a", "b"])
        .wait(Duration::from_secs(5))
        .await;
    assert!(
        matches!(
            refused,
            Err(LockError::Backend {
                retryable: false,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(started.elapsed(), Duration::ZERO, "not retried");
}
