//! MemoryLock keeps the backend semantics: exclusion, expiry, token checks, fencing.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, MemoryLock, Token};
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
