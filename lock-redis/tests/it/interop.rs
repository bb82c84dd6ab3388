//! The interop edges the README promises, against a real server: clients that write the plain
//! `SET name token NX PX ttl` layout (redis-py, node-redlock, redsync) and distlock exclude
//! each other on the same key; a `prefix` makes it another key; python-redis-lock's `lock:`
//! layout is another key; a foreign holder neither gets nor advances a fencing token. Each
//! runs on redis-server (`redis_server::...`) and on Valkey (`valkey_server::...`).

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use redis::aio::MultiplexedConnection;

use lock_testkit::RedisServer;

use crate::common::{get, raw};

/// A lock taken the way redis-py, node-redlock and redsync take one; `true` if it was free.
async fn foreign_set(conn: &mut MultiplexedConnection, key: &str, token: &str) -> bool {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(conn)
        .await
        .expect("SET");
    set.is_some()
}

async fn foreign_release(conn: &mut MultiplexedConnection, key: &str, token: &str) {
    let released: i64 = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) \
         else return 0 end",
    )
    .key(key)
    .arg(token)
    .invoke_async(conn)
    .await
    .expect("release");
    assert_eq!(released, 1);
}

async fn the_plain_layout_excludes_both_ways_and_a_prefix_does_not(server: RedisServer) {
    let mut conn = raw(&server).await;
    let plain = Locker::new(RedisLock::from_url(&server.url()).expect("url"));
    let prefixed = Locker::new(
        RedisLock::builder()
            .url(server.url())
            .prefix("billing:")
            .build()
            .expect("url"),
    );

    assert!(foreign_set(&mut conn, "order:42", "0f1e2d3c4b5a69788796a5b4c3d2e1f0").await);
    assert!(
        plain
            .lock("order:42")
            .try_acquire()
            .await
            .expect("ok")
            .is_none(),
        "a foreign holder on the same key excludes distlock"
    );
    let other_key = prefixed
        .lock("order:42")
        .try_acquire()
        .await
        .expect("ok")
        .expect("with a prefix it is another key: not excluded");
    assert!(get(&mut conn, "billing:order:42").await.is_some());
    other_key.release().await.expect("ours");
    foreign_release(&mut conn, "order:42", "0f1e2d3c4b5a69788796a5b4c3d2e1f0").await;

    let guard = plain.lock("order:42").await.expect("free");
    assert!(
        !foreign_set(&mut conn, "order:42", "another-client").await,
        "a distlock holder excludes a foreign client"
    );
    guard.release().await.expect("ours");
}

async fn python_redis_lock_uses_another_key(server: RedisServer) {
    let mut conn = raw(&server).await;
    let locker = Locker::new(RedisLock::from_url(&server.url()).expect("url"));
    // python-redis-lock stores `lock:<name>` (and signals on a list of its own).
    assert!(foreign_set(&mut conn, "lock:report", "python-redis-lock-id").await);
    let guard = locker
        .lock("report")
        .try_acquire()
        .await
        .expect("ok")
        .expect("not excluded: python-redis-lock's key is `lock:report`");
    guard.release().await.expect("ours");
}

async fn a_foreign_holder_neither_gets_nor_advances_a_fencing_token(server: RedisServer) {
    let mut conn = raw(&server).await;
    let lock = RedisLock::from_url(&server.url()).expect("url");
    let counter = lock.fence_key("job");
    let locker = Locker::new(lock);

    let first = locker.lock("job").await.expect("free");
    let first_fence = first.fencing_token();
    first.release().await.expect("ours");
    let counter_before = get(&mut conn, &counter).await;

    assert!(foreign_set(&mut conn, "job", "redis-py-token").await);
    foreign_release(&mut conn, "job", "redis-py-token").await;
    assert_eq!(
        get(&mut conn, &counter).await,
        counter_before,
        "the foreign grant did not touch the counter"
    );

    let next = locker.lock("job").await.expect("free");
    assert!(
        next.fencing_token() > first_fence,
        "distlock's tokens still grow across foreign grants"
    );
    next.release().await.expect("ours");
}

async fn a_held_lock_waits_for_a_foreign_release_by_polling(server: RedisServer) {
    let mut conn = raw(&server).await;
    let locker = Locker::new(RedisLock::from_url(&server.url()).expect("url"));
    assert!(foreign_set(&mut conn, "poll", "node-redlock-token").await);
    let waiter = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock("poll").wait(Duration::from_secs(20)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    foreign_release(&mut conn, "poll", "node-redlock-token").await;
    // Its TTL is 30 s and the wait 20 s: only polling gets it in within 10 s.
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("in by polling, not at its deadline")
        .expect("no panic")
        .expect("acquired");
    guard.release().await.expect("ours");
}

/// Each check above as a test on each server: `redis_server::name` and `valkey_server::name`.
macro_rules! on_each_server {
    ($($check:ident),+ $(,)?) => {
        mod redis_server {
            $(
                #[tokio::test]
                async fn $check() {
                    super::$check(crate::common::server()).await;
                }
            )+
        }
        mod valkey_server {
            $(
                #[tokio::test]
                async fn $check() {
                    super::$check(crate::common::valkey()).await;
                }
            )+
        }
    };
}

on_each_server!(
    the_plain_layout_excludes_both_ways_and_a_prefix_does_not,
    python_redis_lock_uses_another_key,
    a_foreign_holder_neither_gets_nor_advances_a_fencing_token,
    a_held_lock_waits_for_a_foreign_release_by_polling,
);
