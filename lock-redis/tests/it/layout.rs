//! The documented layout: the lock key holds the plain token with a millisecond TTL (redis-py's
//! `Lock`, node-redlock and redsync use the same), and the fencing counter and release channel
//! hash to the lock key's cluster slot, as a cluster-enabled redis-server computes it.

use std::time::Duration;

use lock_redis::{RedisLock, key_slot};
use lock_testkit::RedisServer;

use crate::common::{get, locker_on, pttl, raw, server, token_of};

#[tokio::test]
async fn the_key_holds_the_plain_token_with_a_ttl() {
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;
    let guard = locker
        .lock("order:42")
        .fixed_ttl(Duration::from_secs(10))
        .await
        .expect("free");
    assert_eq!(get(&mut conn, "order:42").await, Some(token_of(&guard)));
    let ttl = pttl(&mut conn, "order:42").await;
    assert!((9_000..=10_000).contains(&ttl), "{ttl}");
    guard.release().await.expect("ok");

    // With a prefix, the key is prefix + name.
    let prefixed = lock_core::Locker::new(
        RedisLock::builder()
            .url(server.url())
            .prefix("app:")
            .build()
            .expect("url"),
    );
    let guard = prefixed.lock("order:42").await.expect("free");
    assert_eq!(get(&mut conn, "app:order:42").await, Some(token_of(&guard)));
}

#[tokio::test]
async fn foreign_clients_on_the_same_layout_exclude_us() {
    // What redis-py's Lock.acquire sends: SET name token NX PX ms.
    let server = server();
    let locker = locker_on(&server);
    let mut conn = raw(&server).await;
    let set: Option<String> = redis::cmd("SET")
        .arg("shared")
        .arg("py-token")
        .arg("NX")
        .arg("PX")
        .arg(5_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    assert_eq!(set.as_deref(), Some("OK"));
    assert!(
        locker
            .lock("shared")
            .try_acquire()
            .await
            .expect("ok")
            .is_none(),
        "the Python holder excludes us"
    );

    redis::cmd("DEL")
        .arg("shared")
        .query_async::<()>(&mut conn)
        .await
        .expect("DEL");
    let guard = locker.lock("shared").await.expect("free");
    let set: Option<String> = redis::cmd("SET")
        .arg("shared")
        .arg("py-token")
        .arg("NX")
        .arg("PX")
        .arg(5_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    assert_eq!(set, None, "we exclude the Python client");
    guard.release().await.expect("ours");
}

#[tokio::test]
async fn derived_keys_share_the_lock_keys_slot() {
    let cluster_node = RedisServer::builder()
        .cluster_enabled(true)
        .start()
        .expect("cluster-enabled server");
    let mut conn = raw(&cluster_node).await;
    let lock = RedisLock::from_url(&cluster_node.url()).expect("url");
    let names = [
        "order:42",
        "{tenant:7}:order:42",
        "a{b}c",
        "no-tag{}",
        "a}b",
        "}{",
        "{",
        "}",
        "{{x}}",
        "x{",
        "ünï{cödé}",
        "🔒",
    ];
    for name in names {
        let slot = |key: String| {
            let mut conn = conn.clone();
            async move {
                redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(key)
                    .query_async::<u16>(&mut conn)
                    .await
                    .expect("KEYSLOT")
            }
        };
        let key_slot_server = slot(lock.key(name)).await;
        assert_eq!(
            key_slot(&lock.key(name)),
            key_slot_server,
            "our CRC16 agrees with Redis for {name:?}"
        );
        assert_eq!(
            slot(lock.fence_key(name)).await,
            key_slot_server,
            "fencing counter of {name:?}"
        );
        assert_eq!(
            slot(lock.release_channel(name)).await,
            key_slot_server,
            "release channel of {name:?}"
        );
    }
    let _ = &mut conn;
}
