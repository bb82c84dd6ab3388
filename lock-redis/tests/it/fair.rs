//! The fair lock on a real redis-server: grants in the order the processes asked, only the head
//! of the queue is told of a release, and a waiter that dies or gives up stops holding the queue
//! back within its entry's expiry (at once, when it withdraws).

use std::time::Duration;

use futures::StreamExt;
use lock_core::Kind;
use lock_redis::RedisLock;
use tokio::time::{sleep, timeout};

use crate::common::{locker_on, raw, server, slow_polling_on, zcard};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_get_the_lock_in_the_order_they_asked() {
    let server = server();
    let holder = locker_on(&server).fair("job").await.expect("free");
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for id in 0..4 {
        let (locker, order) = (slow_polling_on(&server), order_tx.clone());
        waiters.push(tokio::spawn(async move {
            let guard = locker
                .fair("job")
                .wait(Duration::from_secs(30))
                .await
                .expect("granted in turn");
            order.send(id).expect("open");
            sleep(Duration::from_millis(50)).await;
            guard.release().await.expect("ours");
        }));
        // Let each one take its place before the next asks.
        sleep(Duration::from_millis(150)).await;
    }
    holder.release().await.expect("ours");
    let mut order = Vec::new();
    for _ in 0..4 {
        let id = timeout(Duration::from_secs(10), order_rx.recv())
            .await
            .expect("each is told its turn by the release before it (no 10 s poll)")
            .expect("open");
        order.push(id);
    }
    assert_eq!(order, [0, 1, 2, 3], "first come, first served");
    for waiter in waiters {
        waiter.await.expect("no panic");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_tells_the_head_alone() {
    let server = server();
    let lock = RedisLock::from_url(&server.url()).expect("url");
    let holder = locker_on(&server).fair("job").await.expect("free");
    // Everything published on the name's release channel and on any turn channel.
    let client = redis::Client::open(server.url()).expect("url");
    let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
    pubsub
        .subscribe(lock.release_channel("job"))
        .await
        .expect("SUBSCRIBE");
    pubsub
        .psubscribe(format!("{}*", turn_prefix(&lock, "job")))
        .await
        .expect("PSUBSCRIBE");
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let locker = slow_polling_on(&server);
            tokio::spawn(async move {
                let guard = locker
                    .fair("job")
                    .wait(Duration::from_secs(30))
                    .await
                    .expect("granted");
                sleep(Duration::from_millis(100)).await;
                guard.release().await.expect("ours");
            })
        })
        .collect();
    sleep(Duration::from_millis(300)).await;
    holder.release().await.expect("ours");
    let mut messages = pubsub.on_message();
    let mut seen = Vec::new();
    while let Ok(Some(message)) = timeout(Duration::from_millis(1_500), messages.next()).await {
        seen.push(message.get_channel_name().to_owned());
    }
    for waiter in waiters {
        waiter.await.expect("no panic");
    }
    let turns = seen
        .iter()
        .filter(|c| c.contains(":distlock-turn:"))
        .count();
    let plain = seen.len() - turns;
    assert_eq!(
        turns, 3,
        "one turn message per waiter, each on its own channel: {seen:?}"
    );
    assert_eq!(
        plain, 1,
        "the name's channel only once the queue is empty: {seen:?}"
    );
    let distinct: std::collections::HashSet<_> = seen.iter().collect();
    assert_eq!(
        distinct.len(),
        seen.len(),
        "nobody was told twice: {seen:?}"
    );
}

/// The start of the turn channels of `name` (the layout's `{key}:distlock-turn:`).
fn turn_prefix(lock: &RedisLock, name: &str) -> String {
    let channel = lock.release_channel(name);
    channel.replace(":distlock-released", ":distlock-turn:")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_blocks_the_queue_only_until_its_entry_lapses() {
    let server = server();
    let lock = RedisLock::from_url(&server.url()).expect("url");
    let keys = lock.lock_keys("job").of_kind(Kind::Fair { queued: true });
    let (queue, entries) = (&keys[2], &keys[3]);
    let mut conn = raw(&server).await;
    // A waiter of a process that died: first in the queue, its entry lapsing in 1 s.
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(&mut conn)
        .await
        .expect("TIME");
    let now_ms = secs * 1000 + micros / 1000;
    let () = redis::pipe()
        .cmd("ZADD")
        .arg(queue)
        .arg(0)
        .arg("dl:00000000000000000000000000000000")
        .ignore()
        .cmd("ZADD")
        .arg(entries)
        .arg(now_ms + 1_000)
        .arg("dl:00000000000000000000000000000000")
        .ignore()
        .query_async(&mut conn)
        .await
        .expect("ZADD");
    let started = std::time::Instant::now();
    let guard = locker_on(&server)
        .fair("job")
        .wait(Duration::from_secs(10))
        .await
        .expect("granted once the dead entry lapsed");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "the dead waiter was first: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(4),
        "held back no longer than its entry (1 s) plus a retry: {waited:?}"
    );
    guard.release().await.expect("ours");
    assert_eq!(
        zcard(&mut conn, queue).await,
        0,
        "nothing left in the queue"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_withdraws_its_entry_at_once() {
    let server = server();
    let lock = RedisLock::from_url(&server.url()).expect("url");
    let keys = lock.lock_keys("job").of_kind(Kind::Fair { queued: true });
    let queue = keys[2].clone();
    let mut conn = raw(&server).await;
    let holder = locker_on(&server).fair("job").await.expect("free");
    let quitter = slow_polling_on(&server);
    let gives_up = tokio::spawn(async move {
        quitter
            .fair("job")
            .wait(Duration::from_millis(500))
            .await
            .map(drop)
    });
    let cancelled = {
        let locker = slow_polling_on(&server);
        tokio::spawn(async move {
            locker
                .fair("job")
                .wait(Duration::from_secs(30))
                .await
                .map(drop)
        })
    };
    sleep(Duration::from_millis(300)).await;
    assert_eq!(zcard(&mut conn, &queue).await, 2, "both queued");
    cancelled.abort();
    let answer = gives_up.await.expect("no panic");
    assert!(answer.is_err(), "timed out: {answer:?}");
    let mut left = 2;
    for _ in 0..50 {
        left = zcard(&mut conn, &queue).await;
        if left == 0 {
            break;
        }
        sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(left, 0, "the timed-out and the cancelled waiter withdrew");
    // With the queue empty, the next waiter is the head at once.
    holder.release().await.expect("ours");
    let next = slow_polling_on(&server)
        .fair("job")
        .wait(Duration::ZERO)
        .await
        .expect("free, nobody ahead");
    next.release().await.expect("ours");
}

#[tokio::test]
async fn the_fair_lock_is_the_mutex_of_its_name() {
    let server = server();
    let locker = locker_on(&server);
    let fair = locker.fair("job").await.expect("free");
    assert!(
        locker
            .lock("job")
            .try_acquire()
            .await
            .expect("answers")
            .is_none(),
        "a plain request is kept out by a fair holder"
    );
    assert_eq!(fair.kind(), Kind::Fair { queued: true });
    let mut fair = fair;
    fair.extend(Duration::from_secs(5)).await.expect("ours");
    fair.release().await.expect("ours");
    let plain = locker.lock("job").await.expect("free");
    assert!(
        locker
            .fair("job")
            .try_acquire()
            .await
            .expect("answers")
            .is_none()
    );
    plain.release().await.expect("ours");
}

#[tokio::test]
async fn only_the_head_of_the_queue_is_granted() {
    use lock_core::Token;
    use lock_core::backend::{Attempt, Lock};
    let server = server();
    let lock = RedisLock::from_url(&server.url()).expect("url");
    let fair = Kind::Fair { queued: true };
    let ttl = Duration::from_secs(10);
    let attempt = |token| lock.try_acquire_kind("job", fair, token, ttl);
    let (holder, first, second) = (
        Token::generate().expect("token"),
        Token::generate().expect("token"),
        Token::generate().expect("token"),
    );
    let Attempt::Acquired(held) = attempt(holder).await.expect("answers") else {
        panic!("free");
    };
    assert!(matches!(attempt(first).await, Ok(Attempt::Busy { .. })));
    assert!(matches!(attempt(second).await, Ok(Attempt::Busy { .. })));
    assert!(lock.release(&held).await.expect("answers"));
    // The lock is free, but the second in line is not the head.
    assert!(
        matches!(attempt(second).await, Ok(Attempt::Busy { .. })),
        "the second waiter may not overtake the first"
    );
    let single_try = lock
        .try_acquire_kind(
            "job",
            Kind::Fair { queued: false },
            Token::generate().expect("token"),
            ttl,
        )
        .await;
    assert!(
        matches!(single_try, Ok(Attempt::Busy { .. })),
        "a single try does not jump the queue either"
    );
    let Ok(Attempt::Acquired(granted)) = attempt(first).await else {
        panic!("the head is granted");
    };
    assert_eq!(granted.token(), &first);
    assert!(lock.release(&granted).await.expect("answers"));
    assert!(matches!(attempt(second).await, Ok(Attempt::Acquired(_))));
}
