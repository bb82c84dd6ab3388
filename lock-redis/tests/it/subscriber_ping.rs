//! The release subscriber notices a connection that died without a close (wolph/portalocker#146):
//! it sends `PING` on the subscribed connection, and when no answer comes it reconnects,
//! subscribes again and wakes its waiters to look again.
//!
//! The waiter's subscriber goes through the fault proxy (its `pubsub_url`), its commands go
//! straight to the server; `FaultProxy::sever` then kills the subscribed connection silently:
//! no answer, no FIN, no RST, while new connections work.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::{Lock, ReleaseWatch};
use lock_core::{Backoff, Locker};
use lock_redis::RedisLock;
use lock_testkit::{FaultProxy, RedisServer};

use crate::common::{raw, server, slow_polling_on};

/// Short, so the test does not wait long; the check is the same at the default 5 s.
const PING: Duration = Duration::from_millis(300);
/// The command timeout, which also bounds the answer to a `PING`: generous, so that a loaded
/// machine does not make a healthy link look dead.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// Generous bound on "woken": a ping interval, its answer's timeout and a reconnect, on a
/// loaded machine, and well below the holder's 30 s TTL.
const WOKEN_WITHIN: Duration = Duration::from_secs(10);

/// A lock whose commands go to `server` and whose subscriber goes through `proxy`.
fn subscribed_through(server: &RedisServer, proxy: &FaultProxy, ping: Duration) -> Arc<RedisLock> {
    Arc::new(
        RedisLock::builder()
            .url(server.url())
            .pubsub_url(proxy.url())
            .command_timeout(ANSWER_WITHIN)
            .subscriber_ping_interval(ping)
            .build()
            .expect("valid URLs"),
    )
}

/// Subscribers to the release channel of `name` on `server`.
async fn subscribers(server: &RedisServer, name: &str) -> i64 {
    let channel = RedisLock::from_url(&server.url())
        .expect("url")
        .release_channel(name);
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(&channel)
        .query_async(&mut raw(server).await)
        .await
        .expect("PUBSUB NUMSUB");
    n
}

/// Polls (at most 100 × 50 ms) until `name` has `n` subscribers or more.
async fn wait_subscribers(server: &RedisServer, name: &str, n: i64) -> i64 {
    let mut seen = 0;
    for _ in 0..100 {
        seen = subscribers(server, name).await;
        if seen >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen
}

async fn watch(lock: &RedisLock, name: &str) -> ReleaseWatch {
    lock.watch(name)
        .await
        .expect("subscribed")
        .expect("announcements on")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_dead_subscriber_link_is_noticed_and_the_waiter_wakes() {
    let server = server();
    let proxy = FaultProxy::start(server.addr()).expect("proxy");
    let holder_side = slow_polling_on(&server);
    let holder = holder_side.lock("a").await.expect("free"); // renewed: its TTL stays ~30 s

    let lock = subscribed_through(&server, &proxy, PING);
    let watch = watch(&lock, "a").await;
    // Polling alone would take 10 s per try (as `common::slow_polling`).
    let waiter_side = Locker::builder(Arc::clone(&lock))
        .backoff(Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build();
    let waiter = tokio::spawn(async move {
        waiter_side
            .lock("a")
            .wait(Duration::from_secs(60))
            .await
            .map(drop)
    });
    assert_eq!(
        wait_subscribers(&server, "a", 1).await,
        1,
        "one subscription"
    );
    // The waiter's busy attempt has marked the name, so the release will be announced.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = watch.signal().generation();
    // The link is healthy and stays so for a few pings: one connection, one subscription.
    tokio::time::sleep(3 * PING).await;
    assert_eq!(watch.signal().generation(), before, "no wake-up yet");
    assert_eq!(subscribers(&server, "a").await, 1);
    assert_eq!(proxy.connections(), 1);

    proxy.sever();
    holder.release().await.expect("ours");

    // The announcement went down the dead link. The subscriber's PING finds it dead, and it
    // reconnects, subscribes again and wakes its waiters.
    tokio::time::timeout(WOKEN_WITHIN, watch.signal().changed_since(before))
        .await
        .expect("the watch was woken after the link died");
    // Subscribed again on a new connection: a second connection through the proxy, and the
    // channel subscribed on the server. (Whether the severed connection still counts there
    // depends on when the server notices it is gone: under load it sometimes had already.)
    let seen = wait_subscribers(&server, "a", 1).await;
    assert!(
        seen >= 1 && proxy.connections() >= 2,
        "subscribed again on a new connection: {seen} subscribers, {} proxy connections",
        proxy.connections()
    );
    tokio::time::timeout(WOKEN_WITHIN, waiter)
        .await
        .expect("the waiter got in, not at the holder's 30 s TTL")
        .expect("no panic")
        .expect("acquired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_on_a_healthy_link_change_nothing() {
    let server = server();
    let proxy = FaultProxy::start(server.addr()).expect("proxy");
    let lock = subscribed_through(&server, &proxy, Duration::from_millis(50));
    let watch = watch(&lock, "a").await;
    let before = watch.signal().generation();
    // Twenty intervals: each PING answered, no reconnect, so no spurious wake-up.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(watch.signal().generation(), before, "no wake-up");
    assert_eq!(subscribers(&server, "a").await, 1, "the same subscription");
    assert_eq!(proxy.connections(), 1, "the same connection");
    // And it still carries announcements.
    let mut conn = raw(&server).await;
    let channel = lock.release_channel("a");
    let _: i64 = redis::cmd("PUBLISH")
        .arg(&channel)
        .arg("released")
        .query_async(&mut conn)
        .await
        .expect("PUBLISH");
    tokio::time::timeout(WOKEN_WITHIN, watch.signal().changed_since(before))
        .await
        .expect("announcement delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pings_off_a_silently_dead_link_goes_unnoticed() {
    // The hazard itself, shown: the same scenario with the check off (`Duration::ZERO`).
    let server = server();
    let proxy = FaultProxy::start(server.addr()).expect("proxy");
    let lock = subscribed_through(&server, &proxy, Duration::ZERO);
    let watch = watch(&lock, "a").await;
    let before = watch.signal().generation();
    proxy.sever();
    let mut conn = raw(&server).await;
    let _: i64 = redis::cmd("PUBLISH")
        .arg(lock.release_channel("a"))
        .arg("released")
        .query_async(&mut conn)
        .await
        .expect("PUBLISH");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        watch.signal().generation(),
        before,
        "the announcement was lost"
    );
    assert_eq!(subscribers(&server, "a").await, 1, "never subscribed again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_is_on_by_default() {
    // A lock built with no ping setting: the default interval (5 s) and the default command
    // timeout (1 s) notice the dead link, about 6 s after it died.
    let server = server();
    let proxy = FaultProxy::start(server.addr()).expect("proxy");
    let lock = RedisLock::builder()
        .url(server.url())
        .pubsub_url(proxy.url())
        .build()
        .expect("valid URLs");
    let watch = watch(&lock, "a").await;
    let before = watch.signal().generation();
    proxy.sever();
    let severed = std::time::Instant::now();
    let bound = lock_redis::DEFAULT_SUBSCRIBER_PING_INTERVAL
        + lock_redis::DEFAULT_OPERATION_TIMEOUT
        + WOKEN_WITHIN;
    tokio::time::timeout(bound, watch.signal().changed_since(before))
        .await
        .expect("noticed with the defaults");
    eprintln!("dead link noticed {:?} after it died", severed.elapsed());
    assert!(
        wait_subscribers(&server, "a", 2).await >= 2,
        "subscribed again"
    );
}
