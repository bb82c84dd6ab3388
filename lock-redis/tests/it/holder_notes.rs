//! Holder descriptions for observers (`Lock::describe_holder`, `Lock::annotate`): a note beside
//! the grant in `{key}:distlock-note` (token, fencing token, note), read back with the key's
//! PTTL and the fencing counter in one script. The lock key keeps the plain token.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{LockError, Locker};
use lock_redis::{MAX_NOTE_BYTES, RedisLock};
use lock_testkit::RedisServer;
use lock_testkit::holders;

use crate::common::{get, lock_on, pttl, raw, server, token_of, valkey};

const NOTE: &str = "{order:42}:distlock-note";

/// A lock on `server` and a locker over the same `RedisLock`.
fn on(server: &RedisServer) -> (Arc<RedisLock>, Locker) {
    let lock = Arc::new(lock_on(server));
    (Arc::clone(&lock), Locker::new(lock))
}

async fn annotate_then_describe_on(server: &RedisServer) {
    let (lock, locker) = on(server);
    let mut conn = raw(server).await;
    // Before any note the term comes from the fencing counter; then the note is written.
    let guard = holders::annotate_then_describe(
        &*lock,
        &locker,
        "order:42",
        Duration::from_secs(10),
        b"pod-a:8080\nsecond line",
    )
    .await;

    // The lock key is untouched: still the plain token (the redis-py / node-redlock layout),
    // and the note key carries the grant's token and fencing token in front of the note.
    let token = token_of(&guard);
    assert_eq!(
        get(&mut conn, "order:42").await.as_deref(),
        Some(token.as_str())
    );
    assert_eq!(
        get(&mut conn, NOTE).await,
        Some(format!(
            "{token}\n{}\npod-a:8080\nsecond line",
            guard.fencing_token()
        ))
    );
    // The note outlives a renewal without being touched: it lasts the counter's retention.
    assert!(pttl(&mut conn, NOTE).await > 3_600_000);
    guard.release().await.expect("released");
    holders::assert_no_holder(&*lock, "order:42").await;
}

#[tokio::test]
async fn annotate_then_describe() {
    annotate_then_describe_on(&server()).await;
}

#[tokio::test]
async fn annotate_then_describe_on_valkey() {
    annotate_then_describe_on(&valkey()).await;
}

#[tokio::test]
async fn an_earlier_grants_note_is_never_shown_with_a_later_grant() {
    let server = server();
    let (lock, locker) = on(&server);
    let first = locker
        .lock("order:42")
        .fixed_ttl(Duration::from_secs(10))
        .await
        .expect("granted");
    let stale = first.lease();
    assert!(lock.annotate(&stale, b"first").await.expect("writes"));
    first.release().await.expect("released");

    let second = locker
        .lock("order:42")
        .fixed_ttl(Duration::from_secs(10))
        .await
        .expect("granted");
    holders::a_later_grant_starts_without_a_note(
        &*lock,
        "order:42",
        &stale,
        &second.lease(),
        b"second",
    )
    .await;
    second.release().await.expect("released");
}

#[tokio::test]
async fn a_foreign_holder_has_no_term() {
    let server = server();
    let (lock, locker) = on(&server);
    let mut conn = raw(&server).await;
    // A fenced grant first, so the counter exists: a foreign holder must not borrow it.
    let guard = locker.lock("order:42").await.expect("granted");
    guard.release().await.expect("released");
    // redis-py's `Lock` stores a plain token of its own: `SET name token NX PX ttl`.
    let () = redis::cmd("SET")
        .arg("order:42")
        .arg("0f3c9e1a2b7d4c5e8f60718293a4b5c6")
        .arg("NX")
        .arg("PX")
        .arg(5_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    holders::a_foreign_holder_has_no_term(&*lock, "order:42", Duration::from_secs(5)).await;
}

#[tokio::test]
async fn bad_input_and_wrong_types_are_typed_errors() {
    let server = server();
    let (lock, locker) = on(&server);
    let mut conn = raw(&server).await;
    let guard = locker.lock("order:42").await.expect("granted");
    holders::notes_are_bounded(&*lock, &guard.lease(), MAX_NOTE_BYTES).await;
    guard.release().await.expect("released");

    let answer = lock.describe_holder("order:42:distlock-note").await;
    assert!(
        matches!(answer, Err(LockError::InvalidInput { .. })),
        "a derived key's name: {answer:?}"
    );
    let answer = locker.lock("order:42:distlock-note").try_acquire().await;
    assert!(
        matches!(answer, Err(LockError::InvalidInput { .. })),
        "a lock may not be named like a note key: {answer:?}"
    );
    let _: i64 = redis::cmd("LPUSH")
        .arg("listed")
        .arg("x")
        .query_async(&mut conn)
        .await
        .expect("LPUSH");
    let answer = lock.describe_holder("listed").await;
    assert!(
        matches!(answer, Err(LockError::WrongType { ref key, .. }) if key == "listed"),
        "a list under the key: {answer:?}"
    );
}

#[tokio::test]
async fn without_fencing_no_holders_are_declared() {
    let server = server();
    let lock = RedisLock::builder()
        .url(server.url())
        .fencing(false)
        .build()
        .expect("valid");
    assert!(!lock.capabilities().holders);
}

/// Leader election over Redis: `leader()` tells the term and the value, while the lock key
/// keeps the leader's plain token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_on_redis_has_observers() {
    let server = server();
    let (_lock, locker) = on(&server);
    let mut conn = raw(&server).await;
    let observer = Locker::new(lock_on(&server));
    let (leadership, _) =
        holders::a_leader_is_described(locker.elect("scheduler"), &observer, "pod-a").await;
    let value = get(&mut conn, "scheduler").await.expect("held");
    assert!(
        value.starts_with("dl:") && value.len() == 35,
        "the key holds the plain token: {value:?}"
    );
    holders::a_resignation_leaves_no_leader(leadership, &observer).await;
}

/// Through Sentinel: the leader's term and value read from the primary, and again from the
/// replica promoted by a failover (the note and the key were replicated before it).
#[cfg(feature = "sentinel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_through_sentinel_survives_a_failover() {
    let set = lock_testkit::RedisSentinelSet::start().expect("primary, replica and sentinels");
    let lock = || {
        RedisLock::builder()
            .sentinel(set.sentinel_urls(), set.master_name())
            .connect_timeout(Duration::from_secs(2))
            .command_timeout(Duration::from_secs(1))
            .grace(Duration::ZERO)
            .build()
            .expect("sentinel URLs")
    };
    assert!(lock().capabilities().holders);
    let (candidate, observer) = (Locker::new(lock()), Locker::new(lock()));
    let (leadership, _) =
        holders::a_leader_is_described(candidate.elect("scheduler"), &observer, "pod-a").await;

    set.primary_server()
        .expect("primary")
        .command(&["WAIT", "1", "2000"])
        .expect("the replica has the key and the note");
    tokio::task::block_in_place(|| set.failover()).expect("the replica was promoted");
    // The observer follows the new master (its first command may meet the old one's closed
    // connection: bounded retries).
    let mut after = None;
    for _ in 0..20 {
        match observer.elect("scheduler").leader().await {
            Ok(found) => {
                after = found;
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    let after = after.expect("a leader after the failover");
    assert_eq!(after.term(), leadership.term());
    assert_eq!(after.value_str(), Some("pod-a"));
    drop(leadership);
}
