//! The Locker drives a Redlock like any backend: waiting for a held lock (its full-jitter
//! backoff is what desynchronises competing clients), a typed timeout, one holder at a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lock_core::{LockError, Locker, TimeoutPhase};
use tokio::time::{Instant, sleep};

use crate::common;
use crate::common::memory::{Behavior, held, nodes, redlock, scripted, settle};

#[tokio::test(start_paused = true)]
async fn waits_for_a_held_lock_and_times_out_typed() {
    let nodes = nodes(5);
    let locker = Locker::new(redlock(&nodes));
    let first = locker
        .lock("a")
        .fixed_ttl(Duration::from_secs(2))
        .await
        .expect("free");
    assert!(locker.lock("a").try_acquire().await.expect("ok").is_none());
    let error = locker
        .lock("a")
        .wait(Duration::from_millis(500))
        .await
        .expect_err("held");
    assert!(
        matches!(
            error,
            LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            }
        ),
        "{error:?}"
    );
    // Expiry frees it: a waiter gets it once the first lease's keys are gone.
    let started = Instant::now();
    let second = locker
        .lock("a")
        .wait(Duration::from_secs(10))
        .await
        .expect("after expiry");
    assert!(started.elapsed() >= Duration::from_millis(1_400));
    assert!(
        matches!(first.release().await, Err(LockError::NotOwned { .. })),
        "expired, not ours"
    );
    second.release().await.expect("ok");
}

#[tokio::test(start_paused = true)]
async fn a_wait_through_lost_quorum_reports_the_quorum_error() {
    let fail = Behavior::Fail { retryable: true };
    let nodes = scripted(&[Behavior::Normal, fail, fail]);
    let locker = Locker::new(redlock(&nodes));
    let error = locker
        .lock("a")
        .wait(Duration::from_millis(300))
        .await
        .expect_err("no quorum");
    assert!(
        common::memory::quorum_error(&error).is_some(),
        "retried within the wait, then the last error: {error:?}"
    );
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn tasks_take_turns() {
    // Slow nodes make every round take time, so turns really interleave.
    let nodes = scripted(&[
        Behavior::DelayBefore(Duration::from_millis(1)),
        Behavior::DelayBefore(Duration::from_millis(2)),
        Behavior::DelayBefore(Duration::from_millis(3)),
    ]);
    let locker = Locker::new(redlock(&nodes));
    let inside = Arc::new(AtomicUsize::new(0));
    let total = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (locker, inside, total) = (locker.clone(), Arc::clone(&inside), Arc::clone(&total));
            tokio::spawn(async move {
                for _ in 0..5 {
                    let guard = locker
                        .lock("a")
                        .fixed_ttl(Duration::from_secs(10))
                        .wait(Duration::from_secs(60))
                        .await
                        .expect("acquired");
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    let seen = total.load(Ordering::SeqCst);
                    sleep(Duration::from_millis(3)).await;
                    total.store(seen + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("ok");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("no task panicked");
    }
    assert_eq!(total.load(Ordering::SeqCst), 40, "no lost update");
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}
