//! An acquire future dropped at any await point leaves no lock behind once cleanup has run,
//! and cleanup never releases another holder's lock.

use std::task::Poll;
use std::time::Duration;

use futures::poll;

use crate::common::{self, locker_on, raw, server, token_of, wait_until_gone};

/// Polls a fresh acquire `polls` times, giving the I/O a little time between polls, then drops
/// it. Returns whether it had completed (then its guard was dropped too, which also releases).
async fn acquire_then_drop(locker: &lock_core::Locker, name: &str, polls: usize) -> bool {
    let mut acquire = Box::pin(
        locker
            .lock(name)
            .fixed_ttl(Duration::from_secs(30))
            .wait(Duration::from_secs(30))
            .acquire(),
    );
    for _ in 0..polls {
        if let Poll::Ready(result) = poll!(&mut acquire) {
            drop(result.expect("acquire"));
            return true;
        }
        tokio::time::sleep(Duration::from_micros(50)).await;
    }
    false // dropped while pending
}

#[tokio::test]
async fn a_dropped_acquire_leaves_no_lock() {
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;
    let (mut pending, mut completed) = (0, 0);
    // From "never polled" through the connect, the EVALSHA in flight, to done.
    for polls in 0..40 {
        if acquire_then_drop(&locker, "a", polls).await {
            completed += 1;
        } else {
            pending += 1;
        }
        assert!(
            wait_until_gone(&mut conn, "a").await,
            "a lock was left behind after {polls} polls"
        );
    }
    assert!(
        pending > 1 && completed > 1,
        "both drop paths ran: {pending} pending, {completed} completed"
    );
}

#[tokio::test]
async fn a_dropped_waiter_leaves_the_holder_alone() {
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;
    let holder = locker.lock("b").await.expect("free");
    let holder_token = token_of(&holder);
    // Waiters dropped mid-attempt and mid-sleep: their cleanup must not delete the holder's key.
    for polls in 0..30 {
        assert!(
            !acquire_then_drop(&locker, "b", polls).await,
            "the lock is held"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await; // let every cleanup run
    assert_eq!(
        common::get(&mut conn, "b").await.as_deref(),
        Some(holder_token.as_str())
    );
    holder.release().await.expect("still ours");
}
