//! A waiter in another `PostgresLock` (as in another process) behind a holder with a 30 s TTL
//! gets in as soon as the holder releases: woken by NOTIFY on the listening connection, since
//! its own wait (15 s) ends long before the holder's TTL and its polling would take 20 s.

use crate::common;

use std::time::Duration;

use lock_core::{Backoff, Locker};

fn slow_polling(lock: lock_postgres::PostgresLock) -> Locker {
    Locker::builder(lock)
        .backoff(Backoff::new(
            Duration::from_secs(20),
            Duration::from_secs(20),
        ))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_in_another_lock_wakes_the_waiter() {
    let server = common::server();
    let holder_side = slow_polling(common::lock(&server).await);
    let waiter_side = slow_polling(common::lock(&server).await);
    let holder = holder_side
        .lock("a")
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("free");
    let waiter = tokio::spawn(async move {
        waiter_side
            .lock("a")
            .wait(Duration::from_secs(15))
            .await
            .map(|guard| guard.fencing_token())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let holder_fence = holder.fencing_token();
    holder.release().await.expect("ours");
    let fence = waiter
        .await
        .expect("no panic")
        .expect("woken by the release announcement before its 15 s wait ran out");
    assert!(fence > holder_fence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiters_of_many_names_share_one_listener() {
    const NAMES: usize = 5;
    const WAITERS_PER_NAME: usize = 4;
    let server = common::server();
    let holder_side = slow_polling(common::lock(&server).await);
    let waiter_side = slow_polling(common::lock(&server).await);
    let mut holders = Vec::new();
    for n in 0..NAMES {
        holders.push(
            holder_side
                .lock(format!("name-{n}"))
                .fixed_ttl(Duration::from_secs(30))
                .await
                .expect("free"),
        );
    }
    let mut waiters = Vec::new();
    for n in 0..NAMES {
        for _ in 0..WAITERS_PER_NAME {
            let locker = waiter_side.clone();
            waiters.push(tokio::spawn(async move {
                let guard = locker
                    .lock(format!("name-{n}"))
                    .wait(Duration::from_secs(15))
                    .await?;
                guard.release().await
            }));
        }
    }
    let client = common::client(&server.url()).await;
    // Wait (bounded) until the waiters listen, then count the listening connections.
    let mut listeners = 0;
    for _ in 0..200 {
        listeners = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN distlock_released%'",
                &[],
            )
            .await
            .expect("count listeners")
            .get::<_, i64>(0);
        if listeners > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(listeners, 1, "one listening connection for every name");
    for holder in holders {
        holder.release().await.expect("ours");
    }
    for waiter in waiters {
        waiter
            .await
            .expect("no panic")
            .expect("every waiter got in and released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects_after_its_connection_is_killed() {
    let server = common::server();
    let holder_side = slow_polling(common::lock(&server).await);
    let waiter_side = slow_polling(common::lock(&server).await);
    let client = common::client(&server.url()).await;
    let listener_pids = || async {
        client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN distlock_released%'",
                &[],
            )
            .await
            .expect("listeners")
            .iter()
            .map(|row| row.get::<_, i32>(0))
            .collect::<Vec<i32>>()
    };

    let holder = holder_side
        .lock("a")
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("free");
    let waiter = tokio::spawn(async move {
        waiter_side
            .lock("a")
            .wait(Duration::from_secs(15))
            .await
            .map(drop)
    });
    let mut first = Vec::new();
    for _ in 0..100 {
        first = listener_pids().await;
        if !first.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(first.len(), 1, "the waiter's listener never listened");
    client
        .execute("SELECT pg_terminate_backend($1)", &[&first[0]])
        .await
        .expect("terminate the listener's backend");
    let mut second = Vec::new();
    for _ in 0..100 {
        second = listener_pids().await;
        if !second.is_empty() && second != first {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        second.len() == 1 && second != first,
        "the listener did not reconnect: {first:?} then {second:?}"
    );
    holder.release().await.expect("ours");
    waiter
        .await
        .expect("no panic")
        .expect("woken through the new listening connection");
}
