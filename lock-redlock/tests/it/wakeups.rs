//! A waiter in another client wakes on the holder's release through the nodes' release
//! announcements (Redis pub/sub, merged by the Redlock), not at its next backoff.

use std::time::{Duration, Instant};

use lock_core::backend::Lock;
use lock_core::{Backoff, Locker};

use crate::common::servers::Nodes;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_is_announced_through_the_redlock() {
    let nodes = Nodes::start(3);
    let holder = nodes.redlock();
    let watcher = nodes.redlock();
    let watch = watcher
        .watch("job")
        .await
        .expect("ok")
        .expect("RedisLock nodes announce releases");
    let seen = watch.signal().generation();
    let guard = Locker::new(holder)
        .lock("job")
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("granted");
    // A release is announced to those who wait: a busy attempt marks the wait on each node.
    let busy = Locker::new(watcher)
        .lock("job")
        .try_acquire()
        .await
        .expect("ok");
    assert!(busy.is_none(), "held by the other client");
    guard.release().await.expect("ok");
    tokio::time::timeout(Duration::from_secs(5), watch.signal().changed_since(seen))
        .await
        .expect("the release was announced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_in_another_client_is_woken_by_the_release() {
    let nodes = Nodes::start(3);
    let holder = Locker::new(nodes.redlock());
    // The waiter's backoff alone would sleep up to the holder's TTL (30 s) between attempts.
    let waiter = Locker::builder(nodes.redlock())
        .backoff(Backoff::new(
            Duration::from_secs(30),
            Duration::from_secs(30),
        ))
        .build();
    let guard = holder
        .lock("job")
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("granted");
    let waiting = tokio::spawn(async move {
        waiter
            .lock("job")
            .fixed_ttl(Duration::from_secs(30))
            .wait(Duration::from_secs(60))
            .await
    });
    // Let the waiter find the lock busy and subscribe on the nodes (bounded wait).
    for _ in 0..500 {
        let mut subscribed = 0;
        for i in 0..3 {
            subscribed += usize::from(nodes.subscribers(i, "job").await > 0);
        }
        if subscribed == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let released = Instant::now();
    guard.release().await.expect("ok");
    let next = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken well before its 30 s backoff")
        .expect("no panic")
        .expect("granted");
    assert!(released.elapsed() < Duration::from_secs(10));
    next.release().await.expect("ok");
}
