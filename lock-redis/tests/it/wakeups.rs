//! Waiters are woken by release announcements (pub/sub), share one subscription per name,
//! and still get in when an announcement never comes.

use std::sync::Arc;
use std::time::Duration;

use lock_redis::RedisLock;

use crate::common::{self, raw, server, slow_polling_on};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_in_another_client_wakes_the_waiter() {
    let server = server();
    let (holder_side, waiter_side) = (slow_polling_on(&server), slow_polling_on(&server));
    let holder = holder_side.lock("a").await.expect("free"); // renewed: its TTL stays ~30 s
    let waiter = tokio::spawn(async move {
        waiter_side
            .lock("a")
            .wait(Duration::from_secs(60))
            .await
            .map(drop)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = std::time::Instant::now();
    holder.release().await.expect("ours");
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by the announcement, not by a 10 s poll or the 30 s TTL")
        .expect("no panic")
        .expect("acquired");
    assert!(released.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_share_one_subscription_and_all_get_in() {
    const WAITERS: usize = 1_000;
    let server = server();
    let holder_side = slow_polling_on(&server);
    let waiter_side = slow_polling_on(&server);
    let mut conn = raw(&server).await;
    let channel = RedisLock::from_url(&server.url())
        .expect("url")
        .release_channel("hot");
    let holder = holder_side.lock("hot").await.expect("free");
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            // The read-modify-write under the lock goes over the test's own connection (one
            // multiplexed connection, cloned): a connection of each waiter's own made the
            // line 1,000 connection set-ups long, 20-50 s of the test on a loaded machine.
            let (locker, mut conn) = (waiter_side.clone(), conn.clone());
            tokio::spawn(async move {
                let guard = locker
                    .lock("hot")
                    .wait(Duration::from_secs(120))
                    .await
                    .expect("acquired");
                let n: Option<i64> = redis::cmd("GET")
                    .arg("count")
                    .query_async(&mut conn)
                    .await
                    .expect("GET");
                redis::cmd("SET")
                    .arg("count")
                    .arg(n.unwrap_or(0) + 1)
                    .query_async::<()>(&mut conn)
                    .await
                    .expect("SET");
                guard.release().await.expect("release");
            })
        })
        .collect();
    // Bounded wait until the line has formed and subscribed.
    let mut subscribers = 0;
    for _ in 0..100 {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query_async(&mut conn)
            .await
            .expect("NUMSUB");
        subscribers = n;
        if n > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(subscribers, 1, "one subscription for {WAITERS} waiters");
    let subscribes = common::command_calls(&conn, "subscribe").await;
    assert_eq!(
        subscribes, 1,
        "one SUBSCRIBE sent, not one per waiter (nor twice for the first)"
    );
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .expect("CLIENT LIST");
    assert!(
        clients.lines().count() <= 6,
        "a handful of connections, not one per waiter:\n{clients}"
    );
    holder.release().await.expect("ours");
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("in time")
            .expect("no panic");
    }
    let count: i64 = redis::cmd("GET")
        .arg("count")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(count, WAITERS as i64, "every waiter got in, one at a time");
}

#[tokio::test]
async fn a_waiter_gets_in_at_the_holders_ttl_without_an_announcement() {
    // A foreign holder (redis-py's layout) never announces and just expires.
    let server = server();
    let mut conn = raw(&server).await;
    redis::cmd("SET")
        .arg("a")
        .arg("foreign")
        .arg("NX")
        .arg("PX")
        .arg(700)
        .query_async::<()>(&mut conn)
        .await
        .expect("SET");
    let started = std::time::Instant::now();
    let guard = slow_polling_on(&server)
        .lock("a")
        .wait(Duration::from_secs(8))
        .await
        .expect("acquired after the TTL");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "at the holder's TTL, not at the next 10 s poll"
    );
    drop(guard);
}

#[tokio::test]
async fn a_task_reenters_on_redis() {
    let server = server();
    let locker = Arc::new(slow_polling_on(&server));
    tokio::spawn(async move {
        let outer = locker.lock("a").await.expect("free");
        let inner = locker.lock("a").wait(Duration::ZERO).await.expect("nested");
        assert!(inner.is_nested() && !outer.is_nested());
        drop(inner);
        outer.release().await.expect("ours");
    })
    .await
    .expect("no panic");
}
