//! Holder metadata: a lock built with `holder_metadata` describes its holder as the grant's
//! note (`{key}:distlock-note`: the token, the fencing token, then JSON), written by the grant,
//! renewed, handed over and deleted with the lease, and read back by `describe_holder`; the
//! lock key itself keeps the plain token.

use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{LockError, Locker};
use lock_redis::RedisLock;

use crate::common::{self, get, pttl, raw, server, token_of};

/// Where the grant writes its description: its note.
const HOLDER: &str = "{order:42}:distlock-note";

fn described(server: &lock_testkit::RedisServer) -> RedisLock {
    RedisLock::builder()
        .url(server.url())
        .holder_note("nightly settlement")
        .build()
        .expect("valid")
}

/// The description in a note (token, fencing token, JSON), checked to be the note of the grant
/// of `token`.
fn parse(note: &str, token: &str) -> serde_json::Value {
    let mut parts = note.splitn(3, '\n');
    assert_eq!(
        parts.next(),
        Some(token),
        "the note of {token}'s grant: {note}"
    );
    let fence = parts.next().and_then(|f| f.parse::<u64>().ok());
    assert!(fence.is_some_and(|f| f > 0), "a fencing token: {note}");
    serde_json::from_str(parts.next().expect("a note")).expect("the description is JSON")
}

#[tokio::test]
async fn a_grant_describes_its_holder_until_the_release() {
    let server = server();
    let mut conn = raw(&server).await;
    let locker = Locker::new(described(&server));
    let mut guard = locker
        .lock("order:42")
        .fixed_ttl(Duration::from_secs(10))
        .await
        .expect("granted");
    let token = token_of(&guard);
    assert_eq!(
        get(&mut conn, "order:42").await.as_deref(),
        Some(token.as_str()),
        "the lock key keeps the plain token"
    );
    let note = get(&mut conn, HOLDER).await.expect("a description");
    let holder = parse(&note, &token);
    assert_eq!(holder["token"], token.as_str());
    assert_eq!(holder["pid"], u64::from(std::process::id()));
    assert_eq!(holder["note"], "nightly settlement");
    assert!(holder["host"].as_str().is_some_and(|h| !h.is_empty()));
    let ttl = pttl(&mut conn, HOLDER).await;
    assert!(
        (1..=10_000).contains(&ttl),
        "expires with the lease: {ttl} ms"
    );
    let described = locker
        .backend_lock()
        .describe_holder("order:42")
        .await
        .expect("reads")
        .expect("held");
    assert_eq!(described.fencing_token, guard.fencing_token());
    let json = note.splitn(3, '\n').nth(2).expect("a note");
    assert_eq!(
        described.note.as_deref(),
        Some(json.as_bytes()),
        "the one description"
    );

    guard
        .extend(Duration::from_secs(60))
        .await
        .expect("extended");
    let ttl = pttl(&mut conn, HOLDER).await;
    assert!(ttl > 10_000, "renewed with the lease: {ttl} ms");

    guard.release().await.expect("released");
    assert_eq!(get(&mut conn, HOLDER).await, None, "deleted with the lock");
    assert_eq!(get(&mut conn, "order:42").await, None);
}

#[tokio::test]
async fn a_handover_describes_the_next_holder() {
    let server = server();
    let mut conn = raw(&server).await;
    let locker = Locker::new(described(&server));
    let first = locker.lock("order:42").await.expect("granted");
    let next = tokio::spawn({
        let locker = locker.clone();
        async move {
            locker
                .lock("order:42")
                .wait(Duration::from_secs(10))
                .await
                .expect("handed over")
        }
    });
    // Let the second request queue behind the first, so the release hands over.
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.release().await.expect("released");
    let next = next.await.expect("no panic");
    let holder = parse(
        &get(&mut conn, HOLDER).await.expect("a description"),
        &token_of(&next),
    );
    assert_eq!(
        holder["token"],
        token_of(&next).as_str(),
        "the new holder's"
    );
    next.release().await.expect("released");
    assert_eq!(get(&mut conn, HOLDER).await, None);
}

#[tokio::test]
async fn without_holder_metadata_nothing_is_written_beside_the_key() {
    let server = server();
    let mut conn = raw(&server).await;
    let locker = Locker::new(common::lock_on(&server));
    let guard = locker.lock("order:42").await.expect("granted");
    assert_eq!(get(&mut conn, HOLDER).await, None);
    guard.release().await.expect("released");
}

#[test]
fn holder_metadata_needs_fencing() {
    let built = RedisLock::builder()
        .url("redis://127.0.0.1:1/")
        .fencing(false)
        .holder_metadata(true)
        .build();
    assert!(
        matches!(built, Err(LockError::InvalidInput { .. })),
        "{built:?}"
    );
}
