//! MemoryLock keeps the backend semantics: exclusion, expiry, token checks, fencing.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Fence, Lease, Locker, MemoryLock, Token};
use tokio::time::advance;

const TTL: Duration = Duration::from_millis(100);

async fn grant(lock: &MemoryLock, name: &str, ttl: Duration) -> Lease {
    match lock
        .try_acquire(name, Token::generate().expect("rng"), ttl)
        .await
    {
        Ok(Attempt::Acquired(lease)) => lease,
        other => panic!("expected a grant, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_held_name_is_busy_with_the_holders_ttl() {
    let lock = MemoryLock::new();
    let lease = grant(&lock, "a", TTL).await;
    assert_eq!(lease.name(), "a");
    advance(Duration::from_millis(30)).await;
    let busy = lock
        .try_acquire("a", Token::generate().expect("rng"), TTL)
        .await
        .expect("no error");
    assert_eq!(
        busy,
        Attempt::Busy {
            holder_ttl: Some(Duration::from_millis(70)),
            announces: true,
        }
    );
    // Other names are independent.
    grant(&lock, "b", TTL).await;
    assert_eq!(lock.held_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn expiry_frees_the_lock() {
    let lock = MemoryLock::new();
    let first = grant(&lock, "a", TTL).await;
    advance(TTL).await;
    assert!(first.is_expired());
    assert_eq!(lock.held_count(), 0);
    grant(&lock, "a", TTL).await;
}

#[tokio::test(start_paused = true)]
async fn only_the_holder_releases() {
    let lock = MemoryLock::new();
    let lease = grant(&lock, "a", TTL).await;
    let impostor = Lease::new("a", Token::generate().expect("rng"), 0, lease.valid_until());
    assert!(!lock.release(&impostor).await.expect("no error"));
    assert_eq!(
        lock.held_count(),
        1,
        "an impostor's release must leave the lock"
    );
    assert!(lock.release(&lease).await.expect("no error"));
    assert!(
        !lock.release(&lease).await.expect("no error"),
        "a second release is not ours"
    );
    assert_eq!(lock.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_stale_holder_cannot_touch_the_new_holder() {
    let lock = MemoryLock::new();
    let stale = grant(&lock, "a", TTL).await;
    advance(TTL + Duration::from_millis(1)).await;
    let fresh = grant(&lock, "a", TTL).await;
    assert_eq!(lock.extend(&stale, TTL * 10).await.expect("no error"), None);
    assert!(!lock.release(&stale).await.expect("no error"));
    // The new holder is intact, with its own expiry.
    let busy = lock
        .try_acquire("a", Token::generate().expect("rng"), TTL)
        .await
        .expect("no error");
    assert_eq!(
        busy,
        Attempt::Busy {
            holder_ttl: Some(TTL),
            announces: true,
        }
    );
    assert!(lock.release(&fresh).await.expect("no error"));
}

#[tokio::test(start_paused = true)]
async fn extend_moves_the_expiry() {
    let lock = MemoryLock::new();
    let lease = grant(&lock, "a", TTL).await;
    advance(Duration::from_millis(90)).await;
    let until = lock
        .extend(&lease, TTL)
        .await
        .expect("no error")
        .expect("still ours");
    assert_eq!(until - tokio::time::Instant::now(), TTL);
    advance(Duration::from_millis(90)).await;
    assert_eq!(lock.held_count(), 1, "extended past the first TTL");
    advance(Duration::from_millis(10)).await;
    assert_eq!(lock.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn fencing_tokens_increase_across_release_and_expiry() {
    let lock = MemoryLock::new();
    let mut last = 0;
    for round in 0..20 {
        let lease = grant(&lock, "a", TTL).await;
        assert!(
            lease.fencing_token() > last,
            "round {round}: {} <= {last}",
            lease.fencing_token()
        );
        last = lease.fencing_token();
        if round % 2 == 0 {
            assert!(lock.release(&lease).await.expect("no error"));
        } else {
            advance(TTL).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn expired_entries_are_swept() {
    // Many short-lived names must not pile up forever in memory.
    let lock = MemoryLock::new();
    for i in 0..5_000 {
        grant(&lock, &format!("n{i}"), Duration::from_millis(1)).await;
        advance(Duration::from_millis(1)).await;
    }
    assert_eq!(lock.held_count(), 0);
    assert!(
        format!("{lock:?}").matches("Entry").count() < 2_100,
        "expired entries were not swept"
    );
}

/// `Guard::fence()` (and the `LeaseWatch`'s) is the lock's name and the grant's token; a later
/// grant's fence carries a larger token, which the earlier fence's rule admits over, never the
/// other way round; an equal token is admitted (one holder writes many times).
#[tokio::test(start_paused = true)]
async fn a_guards_fence_is_its_name_and_token_and_grows_with_each_grant() {
    let locker = Locker::new(MemoryLock::new());
    let first = locker.lock("acct").await.expect("granted");
    let fence = first.fence();
    assert_eq!(fence, Fence::new("acct", first.fencing_token()));
    assert_eq!(fence.resource, first.lease().name());
    assert_eq!(fence.token, first.lease().fencing_token());
    assert!(fence.token > 0);
    assert_eq!(first.lease_watch().fence(), fence);
    assert!(fence.admits(Some(fence.token)), "equal is admitted");
    first.release().await.expect("released");

    let second = locker.lock("acct").await.expect("granted again");
    let next = second.fence();
    assert_eq!(next.resource, "acct");
    assert!(next.token > fence.token, "{next} after {fence}");
    assert!(next.admits(Some(fence.token)));
    assert!(
        !fence.admits(Some(next.token)),
        "the earlier grant is refused"
    );
    second.release().await.expect("released");

    // Inside `run`, the work's `LeaseWatch` hands out the same fence as its guard would.
    let in_work = locker
        .lock("acct")
        .run(|lease| async move { (lease.fence(), lease.fencing_token()) })
        .await
        .expect("ran");
    assert_eq!(in_work.0, Fence::new("acct", in_work.1));
    assert!(in_work.0.token > next.token);
}
