//! Fencing tokens strictly increase per name across release, expiry, the counter being lost,
//! and a Redis restart with and without persistence.

use std::time::Duration;

use lock_core::Locker;
use lock_testkit::KeepData;

use crate::common::{self, locker_on, raw, server};

async fn grant(locker: &Locker) -> u64 {
    let guard = locker
        .lock("fenced")
        .fixed_ttl(Duration::from_millis(50))
        .wait(Duration::from_secs(5))
        .await
        .expect("acquire");
    let token = guard.fencing_token();
    drop(guard.leak()); // expire rather than release, alternately with release below
    token
}

#[tokio::test]
async fn fencing_tokens_increase_across_release_expiry_and_restart() {
    let mut server = server();
    let locker = locker_on(&server);
    let mut seen = Vec::new();

    // Release, then expiry.
    for _ in 0..5 {
        let guard = locker
            .lock("fenced")
            .fixed_ttl(Duration::from_secs(5))
            .await
            .expect("acquire");
        seen.push(guard.fencing_token());
        guard.release().await.expect("ok");
        seen.push(grant(&locker).await);
    }
    // A restart that keeps the data, then one that loses everything (no persistence).
    server
        .restart(KeepData::Keep)
        .expect("restart keeping data");
    let after_keep = retry_grant(&locker).await;
    seen.push(after_keep);
    server.restart(KeepData::Discard).expect("restart empty");
    let mut conn = raw(&server).await;
    let dbsize: i64 = redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .expect("DBSIZE");
    assert_eq!(dbsize, 0, "the restart really lost the counter");
    seen.push(retry_grant(&locker).await);
    // The counter deleted by hand (eviction, a careless FLUSHDB).
    redis::cmd("FLUSHDB")
        .query_async::<()>(&mut conn)
        .await
        .expect("FLUSHDB");
    seen.push(grant(&locker).await);

    for pair in seen.windows(2) {
        assert!(pair[1] > pair[0], "fencing went backwards: {seen:?}");
    }
}

#[tokio::test]
async fn the_counter_keeps_tokens_increasing_when_the_clock_lags() {
    // A counter ahead of the server clock (as after the clock stepped back) wins: tokens follow
    // it, one by one, instead of falling back to the clock.
    let server = server();
    let locker = locker_on(&server);
    let lock = common::lock_on(&server);
    let mut conn = raw(&server).await;
    let ahead: u64 = 4_000_000_000_000_000; // year 2096 in microseconds
    redis::cmd("SET")
        .arg(lock.fence_key("fenced"))
        .arg(ahead)
        .query_async::<()>(&mut conn)
        .await
        .expect("SET");
    let first = locker.lock("fenced").await.expect("acquire");
    assert_eq!(first.fencing_token(), ahead + 1);
    first.release().await.expect("ok");
    assert_eq!(grant(&locker).await, ahead + 2);
}

#[tokio::test]
async fn tokens_are_per_name_and_the_counter_expires() {
    let server = server();
    let lock = lock_redis::RedisLock::builder()
        .url(server.url())
        .fence_retention(Duration::from_secs(60))
        .build()
        .expect("url");
    let fence_key = lock.fence_key("a");
    let locker = Locker::new(lock);
    let mut conn = raw(&server).await;
    let a = locker.lock("a").await.expect("acquire");
    let b = locker.lock("b").await.expect("acquire");
    assert_ne!(a.fencing_token(), b.fencing_token());
    let ttl = common::pttl(&mut conn, &fence_key).await;
    assert!(
        (1..=60_000).contains(&ttl),
        "the counter is kept for the retention, not forever: {ttl}"
    );
}

/// The first operation after a restart may fail on the old connection; a bounded retry.
async fn retry_grant(locker: &Locker) -> u64 {
    for _ in 0..50 {
        match locker
            .lock("fenced")
            .fixed_ttl(Duration::from_millis(50))
            .wait(Duration::from_secs(5))
            .await
        {
            Ok(guard) => return guard.leak().fencing_token(),
            Err(e) if e.is_retryable() => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("non-retryable error after restart: {e}"),
        }
    }
    panic!("no grant after the restart");
}
