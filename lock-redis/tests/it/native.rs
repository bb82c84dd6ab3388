//! Native compare-and-delete and compare-and-set: on Valkey a release is `DELIFEQ` and an
//! extension `SET … IFEQ … PX`, no script; they keep the script's promises (a stale lease
//! touches nothing, a release announces exactly when a waiter marked, a mark left for another
//! holder stays). A server without them (Redis 7.0) and an ACL user denied them fall back to
//! the scripts, with the same results.

use std::time::Duration;

use futures::StreamExt as _;
use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, Token};
use lock_redis::RedisLock;
use lock_testkit::RedisServer;
use redis::aio::MultiplexedConnection;

use crate::common::{command_calls, exists, get, pttl, raw, server, valkey};

fn lock(url: String, fencing: bool) -> RedisLock {
    RedisLock::builder()
        .url(url)
        .command_timeout(Duration::from_secs(2))
        .fencing(fencing)
        .build()
        .expect("valid config")
}

async fn acquire(lock: &RedisLock, name: &str, ttl: Duration) -> Lease {
    match lock
        .try_acquire(name, Token::generate().expect("token"), ttl)
        .await
        .expect("attempt")
    {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("{name} should be free"),
    }
}

/// The calls of each command the native paths or the scripts send, as the server counts them.
#[derive(Debug, PartialEq, Eq)]
struct Calls {
    delifeq: u64,
    evalsha: u64,
    publish: u64,
}

async fn calls(conn: &MultiplexedConnection) -> Calls {
    Calls {
        delifeq: command_calls(conn, "delifeq").await,
        evalsha: command_calls(conn, "evalsha").await,
        publish: command_calls(conn, "publish").await,
    }
}

/// Acquire, extend, release, and a stale lease's extend and release, on `server` through a
/// lock made by `url`; returns the calls the server counted for the extend and release steps.
async fn cycle_keeps_its_promises(server: &RedisServer, url: String, fencing: bool) -> Calls {
    let lock = lock(url, fencing);
    let mut conn = raw(server).await;
    let lease = acquire(&lock, "job", Duration::from_millis(500)).await;
    let before = calls(&conn).await;

    // Extend: the key's expiry moves to the new TTL.
    assert!(
        lock.extend(&lease, Duration::from_secs(60))
            .await
            .expect("extend")
            .is_some(),
        "our lease extends"
    );
    assert!(pttl(&mut conn, "job").await > 50_000, "the new TTL is set");

    // A stale lease (the key now holds another token) neither extends nor releases it.
    let theirs = "dl:0123456789abcdef0123456789abcdef";
    let stale = Lease::new(
        "job",
        Token::generate().expect("token"),
        0,
        lease.valid_until(),
    );
    redis::cmd("SET")
        .arg("job")
        .arg(theirs)
        .arg("PX")
        .arg(60_000)
        .exec_async(&mut conn)
        .await
        .expect("SET");
    assert_eq!(
        lock.extend(&stale, Duration::from_secs(1))
            .await
            .expect("extend"),
        None
    );
    assert!(!lock.release(&stale).await.expect("release"), "not ours");
    assert_eq!(get(&mut conn, "job").await.as_deref(), Some(theirs));
    assert!(pttl(&mut conn, "job").await > 50_000, "their TTL untouched");

    // Our own again: released, gone.
    redis::cmd("DEL")
        .arg("job")
        .exec_async(&mut conn)
        .await
        .expect("DEL");
    let lease = acquire(&lock, "job", Duration::from_secs(60)).await;
    assert!(lock.release(&lease).await.expect("release"), "ours");
    assert!(!exists(&mut conn, "job").await, "the key is gone");
    assert!(
        !lock.release(&lease).await.expect("release"),
        "released already"
    );
    let after = calls(&conn).await;
    Calls {
        delifeq: after.delifeq - before.delifeq,
        evalsha: after.evalsha - before.evalsha - u64::from(fencing), // the second fenced grant
        publish: after.publish - before.publish,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_releases_and_extends_without_scripts() {
    for fencing in [false, true] {
        let server = valkey();
        let counted = cycle_keeps_its_promises(&server, server.url(), fencing).await;
        // Three releases (stale, ours, again), two DELIFEQs each (the lock, the mark); no
        // script for any extend or release; nobody waited, so nothing announced.
        assert_eq!(
            counted,
            Calls {
                delifeq: 6,
                evalsha: 0,
                publish: 0
            },
            "fencing({fencing})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_7_falls_back_to_the_scripts() {
    let server = server();
    let counted = cycle_keeps_its_promises(&server, server.url(), false).await;
    // Two extends and three releases by script; the refused DELIFEQ did nothing.
    assert_eq!(counted.evalsha, 5, "{counted:?}");
    assert_eq!(counted.publish, 0, "{counted:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_denied_delifeq_falls_back_to_the_script() {
    let server = valkey();
    server
        .command(&[
            "ACL", "SETUSER", "locker", "on", ">s3cret", "~*", "&*", "+@all", "-delifeq",
        ])
        .expect("ACL SETUSER");
    let url = server.url().replace("redis://", "redis://locker:s3cret@");
    let counted = cycle_keeps_its_promises(&server, url, false).await;
    // Extends stay native (SET is allowed); the three releases are scripts.
    assert_eq!(
        counted,
        Calls {
            delifeq: 0,
            evalsha: 3,
            publish: 0
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_commands_off_sends_scripts_only() {
    let server = valkey();
    let lock = RedisLock::builder()
        .url(server.url())
        .fencing(false)
        .native_commands(false)
        .build()
        .expect("valid config");
    let conn = raw(&server).await;
    let lease = acquire(&lock, "job", Duration::from_secs(5)).await;
    lock.extend(&lease, Duration::from_secs(5))
        .await
        .expect("extend")
        .expect("ours");
    assert!(lock.release(&lease).await.expect("release"));
    let counted = calls(&conn).await;
    assert_eq!((counted.delifeq, counted.evalsha), (0, 2));
}

/// Waits (at most 5 s) for one message on `channel`'s subscription.
async fn heard(messages: &mut (impl futures::Stream<Item = redis::Msg> + Unpin)) -> bool {
    tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .is_ok_and(|message| message.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_release_announces_to_its_own_waiters_only() {
    let server = valkey();
    let (holder, waiter) = (lock(server.url(), false), lock(server.url(), false));
    let mut conn = raw(&server).await;
    let channel = holder.release_channel("job");
    let mut pubsub = redis::Client::open(server.url())
        .expect("url")
        .get_async_pubsub()
        .await
        .expect("pubsub");
    pubsub.subscribe(&channel).await.expect("SUBSCRIBE");
    let mut messages = pubsub.into_on_message();

    // A waiter finds the lock busy and marks, with the holder's token.
    let lease = acquire(&holder, "job", Duration::from_secs(30)).await;
    let busy = waiter
        .try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(30),
        )
        .await
        .expect("attempt");
    assert!(
        matches!(
            busy,
            Attempt::Busy {
                announces: true,
                ..
            }
        ),
        "{busy:?}"
    );
    let token = lock_redis::token_value(lease.token()).as_str().to_owned();
    assert_eq!(
        get(&mut conn, &channel).await.as_deref(),
        Some(token.as_str())
    );

    // The release deletes the lock and the mark and announces.
    let before = calls(&conn).await;
    assert!(holder.release(&lease).await.expect("release"));
    assert!(heard(&mut messages).await, "the waiter is told");
    assert!(!exists(&mut conn, "job").await);
    assert!(!exists(&mut conn, &channel).await, "the mark is deleted");
    let after = calls(&conn).await;
    assert_eq!(
        (after.evalsha, after.publish - before.publish),
        (before.evalsha, 1)
    );

    // A mark left for another holder (its waiters wait for that holder's release) stays, and
    // this release announces nothing.
    let lease = acquire(&holder, "job", Duration::from_secs(30)).await;
    let other = "dl:fedcba9876543210fedcba9876543210";
    redis::cmd("SET")
        .arg(&channel)
        .arg(other)
        .arg("PX")
        .arg(30_000)
        .exec_async(&mut conn)
        .await
        .expect("SET");
    assert!(holder.release(&lease).await.expect("release"));
    assert_eq!(get(&mut conn, &channel).await.as_deref(), Some(other));
    assert_eq!(
        calls(&conn).await.publish,
        after.publish,
        "nothing announced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_passes_the_waiting_mark_on() {
    for fencing in [false, true] {
        let server = valkey();
        let (holder, waiter) = (lock(server.url(), fencing), lock(server.url(), fencing));
        let mut conn = raw(&server).await;
        let channel = holder.release_channel("job");
        let lease = acquire(&holder, "job", Duration::from_secs(30)).await;
        let busy = waiter
            .try_acquire(
                "job",
                Token::generate().expect("token"),
                Duration::from_secs(30),
            )
            .await
            .expect("attempt");
        assert!(
            matches!(
                busy,
                Attempt::Busy {
                    announces: true,
                    ..
                }
            ),
            "{busy:?}"
        );

        // Handed to a local waiter: the remote waiter's mark now names the next holder...
        let next = match holder
            .hand_over(
                &lease,
                Token::generate().expect("token"),
                Duration::from_secs(30),
            )
            .await
            .expect("hand over")
        {
            lock_core::backend::Handover::Handed(next) => next,
            other => panic!("not handed over: {other:?}"),
        };
        let next_value = lock_redis::token_value(next.token()).as_str().to_owned();
        assert_eq!(
            get(&mut conn, &channel).await.as_deref(),
            Some(next_value.as_str())
        );

        // ... so that the next holder's native release deletes it and announces.
        let before = calls(&conn).await;
        assert!(holder.release(&next).await.expect("release"));
        assert!(!exists(&mut conn, &channel).await, "fencing({fencing})");
        assert_eq!(
            calls(&conn).await.publish,
            before.publish + 1,
            "fencing({fencing})"
        );
    }
}
