//! Waiters by name ([`LockRequest::describe_waiter`]): a request that waits longer than
//! [`VISIBLE_AFTER`] keeps a record with its description, which an operator's listing finds
//! under the lock's name; a request granted at once writes none; the record goes when the
//! wait ends, granted or given up; a backend that keeps no notes refuses before any I/O.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lock_core::backend::{Capabilities, ListOptions, Lock, NamePattern};
use lock_core::{LockError, Locker, MemoryLock, VISIBLE_AFTER, waiter_record_of};
use tokio::time::sleep;

use crate::common::Declaring;

/// The descriptions of the waiters of `name` the store lists now.
async fn waiters(store: &MemoryLock, name: &str) -> Vec<String> {
    let pattern = NamePattern::new(&format!("{name}:*")).expect("a pattern");
    let listing = store
        .inspector()
        .expect("the memory store's operator reads")
        .list(&pattern, &ListOptions::default())
        .await
        .expect("a listing");
    listing
        .locks
        .iter()
        .filter(|held| waiter_record_of(&held.name) == Some(name))
        .filter_map(|held| held.holders.first()?.note.clone())
        .map(|note| String::from_utf8_lossy(&note).into_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_waiter_is_listed_while_it_waits_and_not_after() {
    let store = Arc::new(MemoryLock::new());
    let holder = Locker::new(Arc::clone(&store));
    let held = holder.lock("job").await.expect("free");
    let waiter = Locker::new(Arc::clone(&store));
    let waiting = tokio::spawn(async move {
        waiter
            .lock("job")
            .describe_waiter(&b"{\"note\":\"report\"}"[..])
            .wait(Duration::from_secs(60))
            .await
    });
    sleep(VISIBLE_AFTER / 2).await;
    assert!(waiters(&store, "job").await.is_empty(), "listed too soon");
    sleep(VISIBLE_AFTER).await;
    assert_eq!(waiters(&store, "job").await, ["{\"note\":\"report\"}"]);
    // Still listed after several of its record's leases: it is renewed.
    sleep(Duration::from_secs(20)).await;
    assert_eq!(
        waiters(&store, "job").await.len(),
        1,
        "renewed while it waits"
    );
    held.release().await.expect("released");
    let granted = waiting.await.expect("the task ran").expect("granted");
    sleep(Duration::from_millis(10)).await;
    assert!(
        waiters(&store, "job").await.is_empty(),
        "the record outlived the wait"
    );
    drop(granted);
}

#[tokio::test(start_paused = true)]
async fn a_request_granted_at_once_or_given_up_leaves_no_record() {
    let store = Arc::new(MemoryLock::new());
    let locker = Locker::new(Arc::clone(&store));
    let guard = locker
        .lock("free")
        .describe_waiter(&b"w"[..])
        .await
        .expect("free");
    sleep(Duration::from_secs(1)).await;
    assert!(
        waiters(&store, "free").await.is_empty(),
        "a record without a wait"
    );
    let other = Locker::new(Arc::clone(&store));
    let gave_up = other
        .lock("free")
        .describe_waiter(&b"w"[..])
        .wait(Duration::from_secs(1))
        .await;
    assert!(
        matches!(gave_up, Err(LockError::Timeout { .. })),
        "{gave_up:?}"
    );
    sleep(Duration::from_millis(10)).await;
    assert!(
        waiters(&store, "free").await.is_empty(),
        "a record after giving up"
    );
    drop(guard);
}

#[tokio::test(start_paused = true)]
async fn a_store_without_notes_refuses_before_any_io() {
    let store = Arc::new(Declaring::new("plain", Capabilities::MUTEX));
    let locker = Locker::new(Arc::clone(&store));
    let refused = locker.lock("job").describe_waiter(&b"w"[..]).await;
    assert!(
        matches!(
            refused,
            Err(LockError::Unsupported {
                kind: "waiter description",
                ..
            })
        ),
        "{refused:?}"
    );
    let too_long = Locker::new(MemoryLock::new())
        .lock("n".repeat(lock_core::MAX_NAME_LEN - 4))
        .describe_waiter(&b"w"[..])
        .await;
    assert!(
        matches!(too_long, Err(LockError::InvalidInput { .. })),
        "{too_long:?}"
    );
    assert_eq!(store.attempts.load(Ordering::SeqCst), 0, "nothing sent");
}

/// Only a name that ends in the record's suffix and a 16-hex-digit id is a waiter's record: an
/// operator's listing never folds a user's own lock under another.
#[test]
fn only_a_waiter_records_name_is_taken_for_one() {
    assert_eq!(
        waiter_record_of("orders:distlock-waiter:00ff00ff00ff00ff"),
        Some("orders")
    );
    for not_one in [
        "orders",
        "orders:distlock-waiter:00ff00ff00ff00f",
        "orders:distlock-waiter:00ff00ff00ff00ff0",
        "orders:distlock-waiter:00ff00ff00ff00fg",
        "orders:distlock-waiter:zzzzzzzzzzzzzzzz",
    ] {
        assert_eq!(waiter_record_of(not_one), None, "{not_one:?}");
    }
}
