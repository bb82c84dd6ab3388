//! Bad input gets `LockError::InvalidInput` before anything is sent, and nothing is written.

use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{Lease, LockError, MAX_NAME_LEN, MAX_TTL, Token};
use lock_redis::RedisLock;

use crate::common::{self, locker_on, raw, server};

fn invalid<T: std::fmt::Debug>(r: Result<T, LockError>, case: &str) {
    match r {
        Err(LockError::InvalidInput { reason }) => {
            assert!(!reason.is_empty(), "{case}: a reason is given");
        }
        other => panic!("{case}: expected InvalidInput, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_requests_are_rejected_and_write_nothing() {
    let server = server();
    let locker = locker_on(&server);
    let long = "n".repeat(MAX_NAME_LEN + 1);
    invalid(locker.lock("").await, "empty name");
    invalid(locker.lock(long.as_str()).await, "name over the limit");
    invalid(locker.lock("a").fixed_ttl(Duration::ZERO).await, "zero TTL");
    invalid(
        locker.lock("a").fixed_ttl(Duration::from_micros(999)).await,
        "TTL under 1 ms",
    );
    invalid(
        locker
            .lock("a")
            .fixed_ttl(MAX_TTL + Duration::from_millis(1))
            .await,
        "TTL beyond the maximum",
    );
    invalid(
        locker.lock("a").fixed_ttl(Duration::MAX).await,
        "Duration::MAX TTL",
    );
    invalid(
        locker.lock("x:distlock-fence").await,
        "a name on a reserved suffix",
    );
    invalid(
        locker.lock("{x}:distlock-released").await,
        "a name on a reserved suffix",
    );

    let lock = common::lock_on(&server);
    let lease = Lease::new(
        "a",
        Token::generate().expect("rng"),
        1,
        tokio::time::Instant::now(),
    );
    invalid(lock.extend(&lease, Duration::ZERO).await, "extend by zero");
    invalid(
        lock.try_acquire("a", Token::generate().expect("rng"), Duration::ZERO)
            .await,
        "backend TTL check",
    );

    let mut conn = raw(&server).await;
    let dbsize: i64 = redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .expect("DBSIZE");
    assert_eq!(dbsize, 0, "nothing was written");
}

#[test]
fn bad_configuration_is_rejected() {
    invalid(RedisLock::from_url("not a url"), "unparsable URL");
    invalid(RedisLock::from_url("http://127.0.0.1:1/"), "wrong scheme");
    invalid(RedisLock::builder().build(), "neither URL nor pool");
    let pool = lock_redis::deadpool_redis::Config::from_url("redis://127.0.0.1:1/")
        .create_pool(Some(lock_redis::deadpool_redis::Runtime::Tokio1))
        .expect("pool");
    invalid(
        RedisLock::builder()
            .url("redis://127.0.0.1:1/")
            .pool(pool)
            .build(),
        "URL and pool",
    );
    let url = "redis://127.0.0.1:1/";
    invalid(
        RedisLock::builder()
            .url(url)
            .command_timeout(Duration::ZERO)
            .build(),
        "zero command timeout",
    );
    invalid(
        RedisLock::builder()
            .url(url)
            .connect_timeout(Duration::ZERO)
            .build(),
        "zero connect timeout",
    );
    invalid(
        RedisLock::builder()
            .url(url)
            .fence_retention(Duration::ZERO)
            .build(),
        "zero retention",
    );
}

#[tokio::test]
async fn big_and_odd_names_work() {
    let server = server();
    let locker = locker_on(&server);
    for name in [
        "n".repeat(MAX_NAME_LEN),
        "{tag}".into(),
        "a}b{".into(),
        "ünïcödé 🔒".into(),
        "with space\nand newline".into(),
    ] {
        let guard = locker
            .lock(name.as_str())
            .await
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert!(
            locker
                .lock(name.as_str())
                .try_acquire()
                .await
                .expect("ok")
                .is_none(),
            "{name:?} held"
        );
        guard.release().await.expect("ok");
    }
}
