//! `LockRequest::run`: work under the lock, cancelled when the lease is lost, always released.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::probe_locker;
use lock_core::LockError;
use tokio::time::sleep;

#[tokio::test(start_paused = true)]
async fn work_runs_under_the_lock_and_releases_it() {
    let (probe, locker) = probe_locker(Duration::from_millis(300));
    let inner = locker.clone();
    let out = locker
        .lock("job")
        .run(|lease| async move {
            assert!(lease.is_held());
            assert!(
                inner.lock("job").try_acquire().await.expect("ok").is_none(),
                "held during the work"
            );
            sleep(Duration::from_secs(2)).await; // longer than the lease: renewal keeps it
            lease.fencing_token()
        })
        .await
        .expect("the work finished");
    assert!(out > 0);
    assert_eq!(probe.inner.held_count(), 0, "released after the work");
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_cancels_the_work() {
    let (probe, locker) = probe_locker(Duration::from_millis(300));
    let finished = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&finished);
    let stealer = Arc::clone(&probe);
    tokio::spawn(async move {
        sleep(Duration::from_millis(500)).await;
        stealer.stolen.store(true, Ordering::SeqCst);
    });
    let err = locker
        .lock("job")
        .run(|_| async move {
            sleep(Duration::from_secs(10)).await;
            flag.store(true, Ordering::SeqCst); // must never run: the lease was lost first
        })
        .await
        .expect_err("lost");
    assert!(
        matches!(err, LockError::Lost { ref name } if name == "job"),
        "{err}"
    );
    assert!(!err.is_retryable());
    sleep(Duration::from_secs(20)).await;
    assert!(!finished.load(Ordering::SeqCst), "the work was cancelled");
}

#[tokio::test(start_paused = true)]
async fn a_fixed_ttl_shorter_than_the_work_is_lost() {
    let (_, locker) = probe_locker(Duration::from_millis(300));
    let err = locker
        .lock("job")
        .fixed_ttl(Duration::from_millis(100))
        .run(|_| sleep(Duration::from_secs(1)))
        .await
        .expect_err("the fixed lease ran out first");
    assert!(matches!(err, LockError::Lost { .. }));
}

/// Another holder took the key (an operator's `DEL`, a key evicted and re-taken) while a fixed
/// lease was still valid here: nothing told the guard, so only the release can. It must say
/// so through `?`, from `release` and from `run`, not as a `false` that is easy to drop.
#[tokio::test(start_paused = true)]
async fn a_lease_found_not_ours_at_release_is_an_error() {
    let (probe, locker) = probe_locker(Duration::from_millis(300));
    let guard = locker
        .lock("job")
        .fixed_ttl(Duration::from_secs(10))
        .await
        .expect("free");
    probe.disowned.store(true, Ordering::SeqCst); // the backend finds another token there
    let err = guard.release().await.expect_err("no longer ours");
    assert!(
        matches!(&err, LockError::NotOwned { name } if name == "job"),
        "{err:?}"
    );

    probe.disowned.store(false, Ordering::SeqCst);
    let disown = Arc::clone(&probe);
    let out = locker
        .lock("work")
        .fixed_ttl(Duration::from_secs(10))
        .run(|_| async move {
            disown.disowned.store(true, Ordering::SeqCst);
            "the work's output"
        })
        .await;
    assert!(
        matches!(&out, Err(LockError::NotOwned { name }) if name == "work"),
        "run reports the lease it released as not ours: {out:?}"
    );
}
