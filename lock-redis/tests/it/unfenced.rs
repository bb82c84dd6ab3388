//! `fencing(false)`: grants by a plain `SET NX PX GET`, with the same exclusion, expiry,
//! wake-ups and typed errors as the fenced default, no fencing counter, and token 0.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, Locker, Token};
use lock_redis::RedisLock;
use redis::AsyncCommands as _;
use tokio::time::Instant;

use crate::common::{command_calls, get, raw, server};

fn unfenced(server: &lock_testkit::RedisServer) -> RedisLock {
    RedisLock::builder()
        .url(server.url())
        .command_timeout(Duration::from_millis(500))
        .fencing(false)
        .build()
        .expect("valid config")
}

#[tokio::test]
async fn grants_exclude_expire_and_carry_token_zero() {
    let server = server();
    let lock = unfenced(&server);
    let mut conn = raw(&server).await;

    let first = match lock
        .try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_millis(300),
        )
        .await
        .expect("attempt")
    {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("a free lock must be granted"),
    };
    assert_eq!(first.fencing_token(), 0, "no fencing token without fencing");
    assert_eq!(
        get(&mut conn, "job").await.as_deref(),
        Some(lock_redis::token_value(first.token()).as_str()),
        "the key holds the holder's token, as redis-py and redsync store it"
    );
    let pttl: i64 = conn.pttl("job").await.expect("PTTL");
    assert!(
        (1..=300).contains(&pttl),
        "the grant carries its TTL: {pttl}"
    );
    let fence_keys: Vec<String> = conn.keys("*distlock-fence").await.expect("KEYS");
    assert!(fence_keys.is_empty(), "no counter is kept: {fence_keys:?}");

    match lock
        .try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(1),
        )
        .await
        .expect("attempt")
    {
        Attempt::Busy {
            holder_ttl,
            announces,
        } => {
            assert_eq!(holder_ttl, None, "a plain SET NX does not say how long");
            assert!(announces, "the holder is distlock's: its value says so");
        }
        Attempt::Acquired(_) => panic!("a held lock must not be granted twice"),
    }

    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = lock
        .try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(5),
        )
        .await
        .expect("attempt");
    assert!(
        matches!(second, Attempt::Acquired(_)),
        "an expired holder frees the lock"
    );
    assert!(
        !lock.release(&first).await.expect("release"),
        "the expired holder's release is refused"
    );
    assert!(
        get(&mut conn, "job").await.is_some(),
        "and leaves the new holder's key alone"
    );
}

#[tokio::test]
async fn one_plain_set_per_grant_and_no_script() {
    let server = server();
    let locker = Locker::new(unfenced(&server));
    let mut conn = raw(&server).await;
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec_async(&mut conn)
        .await
        .expect("CONFIG RESETSTAT");
    for _ in 0..5 {
        let guard = locker.lock("cycle").await.expect("acquire");
        guard.release().await.expect("release");
    }
    // Calls inside scripts count too: 5 grants by SET, 5 release scripts (GET, DEL, PUBLISH).
    assert_eq!(
        command_calls(&conn, "set").await,
        5,
        "one plain SET per grant"
    );
    assert_eq!(
        command_calls(&conn, "evalsha").await,
        5,
        "only the releases are scripts"
    );
    assert_eq!(command_calls(&conn, "time").await, 0, "no clock read");
}

#[tokio::test]
async fn waiters_are_woken_by_the_release() {
    let server = server();
    let locker = Locker::new(unfenced(&server));
    let holder = locker
        .lock("wake")
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("acquire");
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .lock("wake")
                .wait(Duration::from_secs(10))
                .await
                .map(|guard| (guard, Instant::now()))
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released_at = Instant::now();
    holder.release().await.expect("release");
    let (guard, woken_at) = waiter
        .await
        .expect("join")
        .expect("the waiter gets the lock");
    assert!(
        woken_at.duration_since(released_at) < Duration::from_secs(5),
        "woken by the release, not by the 30 s TTL"
    );
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_wrong_type_key_is_a_typed_error_and_left_alone() {
    let server = server();
    let lock = Arc::new(unfenced(&server));
    let mut conn = raw(&server).await;
    let _: () = conn.hset("taken", "field", "value").await.expect("HSET");
    let err = lock
        .try_acquire(
            "taken",
            Token::generate().expect("token"),
            Duration::from_secs(1),
        )
        .await
        .expect_err("a hash is not a lock");
    assert!(
        matches!(err, LockError::WrongType { ref key, .. } if key == "taken"),
        "{err:?}"
    );
    let value: Option<String> = conn.hget("taken", "field").await.expect("HGET");
    assert_eq!(value.as_deref(), Some("value"), "the hash is untouched");
}
