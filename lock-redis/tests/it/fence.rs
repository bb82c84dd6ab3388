//! Fenced writes (`RedisLock::fences`, the `distlock` function library): the redis-cli contract
//! with nothing of distlock but the loaded library, the record's key, the library's version,
//! the script fallback, reloads, atomicity under concurrent writers, and a holder paused past
//! its lease in another OS process.

use std::time::Duration;

use lock_core::{Fence, LockError, Locker};
use lock_redis::{LIBRARY_VERSION, LibraryLoad, RedisFences, RedisLock};
use lock_testkit::RedisServer;

use crate::common::{self, Server, lock_on, raw, server, valkey};

/// The library as a user loads it with `redis-cli FUNCTION LOAD "$(cat fence_library.lua)"`.
const LIBRARY: &str = include_str!("../../lua/fence_library.lua");

fn on(kind: Server) -> RedisServer {
    match kind {
        Server::Redis => server(),
        Server::Valkey => valkey(),
    }
}

/// `args` through the test kit's own client: its error replies come back as `Err` text.
fn cli(server: &RedisServer, args: &[&str]) -> Result<String, String> {
    server.command(args).map_err(|e| e.to_string())
}

/// The contract: FCALL alone, on a server where nothing of distlock but the library is loaded.
fn fcall_contract(kind: Server) {
    let server = on(kind);
    assert_eq!(
        cli(&server, &["FUNCTION", "LOAD", LIBRARY]).expect("a reply"),
        "distlock"
    );
    let set = |token: &str, value: &str| {
        cli(
            &server,
            &["FCALL", "distlock_fenced_set", "1", "acct", token, value],
        )
    };
    assert_eq!(set("22", "a").expect("a reply"), "OK");
    assert_eq!(
        set("22", "b").expect("a reply"),
        "OK",
        "an equal token is accepted"
    );
    let stale = set("21", "c").expect_err("an error");
    assert!(
        stale.contains("STALEFENCE") && stale.contains("token 21 < accepted 22 for acct"),
        "{stale}"
    );
    assert_eq!(
        cli(&server, &["GET", "acct"]).expect("a reply"),
        "b",
        "untouched"
    );
    assert_eq!(
        cli(&server, &["GET", "{acct}:distlock-accepted"]).expect("a reply"),
        "22"
    );
    assert_eq!(
        cli(
            &server,
            &[
                "FCALL",
                "distlock_fenced_set",
                "1",
                "acct",
                "23",
                "d",
                "PX",
                "60000"
            ]
        )
        .expect("a reply"),
        "OK"
    );
    let pttl: i64 = cli(&server, &["PTTL", "acct"])
        .expect("a reply")
        .parse()
        .expect("a reply");
    assert!(pttl > 0 && pttl <= 60_000, "{pttl}");
    let del = |token: &str| {
        cli(
            &server,
            &["FCALL", "distlock_fenced_del", "1", "acct", token],
        )
    };
    let stale = del("22").expect_err("an error");
    assert!(stale.contains("STALEFENCE") && stale.contains("token 22 < accepted 23"));
    assert_eq!(cli(&server, &["GET", "acct"]).expect("a reply"), "d");
    assert_eq!(del("23").expect("a reply"), "1");
    assert_eq!(del("23").expect("a reply"), "0");
    assert_eq!(
        cli(&server, &["GET", "{acct}:distlock-accepted"]).expect("a reply"),
        "23",
        "the record outlives the value"
    );
    for bad in ["-1", "x", "1.5", "007", "9007199254740992"] {
        let err = set(bad, "e").expect_err("an error");
        assert!(err.contains("fencing token"), "{bad}: {err}");
    }
    assert_eq!(
        cli(&server, &["FCALL_RO", "distlock_version", "0"]).expect("a reply"),
        LIBRARY_VERSION.to_string()
    );
}

#[test]
fn redis_cli_alone_writes_fenced_on_redis() {
    fcall_contract(Server::Redis);
}

#[test]
fn redis_cli_alone_writes_fenced_on_valkey() {
    fcall_contract(Server::Valkey);
}

/// The Rust API over a real lock: grants' fences, stale refusal, equal accepted, bad input.
async fn rust_api(kind: Server) {
    let server = on(kind);
    let lock = lock_on(&server);
    let fences = lock.fences();
    let locker = Locker::new(lock_on(&server));
    let first = locker.lock("cache").await.expect("first grant");
    let old = first.fence().for_resource("cache:page");
    first.release().await.expect("released");
    let second = locker.lock("cache").await.expect("second grant");
    let new = second.fence().for_resource("cache:page");
    assert!(new.token > old.token);
    fences.set(&new, b"fresh", None).await.expect("applied");
    fences
        .set(&new, b"fresher", Some(Duration::from_secs(60)))
        .await
        .expect("equal token applied");
    let err = fences.set(&old, b"stale", None).await.expect_err("stale");
    assert!(
        matches!(&err, LockError::Fenced { resource, token, current }
            if resource == "cache:page" && *token == old.token && *current == new.token),
        "{err:?}"
    );
    assert!(!fences.del(&old).await.expect_err("stale").is_retryable());
    let mut conn = raw(&server).await;
    assert_eq!(
        common::get(&mut conn, "cache:page").await.as_deref(),
        Some("fresher")
    );
    assert!(fences.del(&new).await.expect("deleted"));
    assert!(!fences.del(&new).await.expect("absent"));
    let invalid = |e: LockError| matches!(e, LockError::InvalidInput { .. });
    let big = Fence::new("k", 1 << 53);
    assert!(invalid(
        fences.set(&big, b"", None).await.expect_err("an error")
    ));
    let zero_ttl = Some(Duration::from_micros(10));
    assert!(invalid(
        fences.set(&new, b"", zero_ttl).await.expect_err("an error")
    ));
    for key in ["", "a}b", "x:distlock-accepted"] {
        let fence = Fence::new(key, 1);
        assert!(
            invalid(fences.set(&fence, b"", None).await.expect_err("an error")),
            "{key:?}"
        );
    }
    redis::cmd("HSET")
        .arg("{typed}:distlock-accepted")
        .arg("f")
        .arg("v")
        .exec_async(&mut conn)
        .await
        .expect("a reply");
    let typed = fences.set(&Fence::new("typed", 1), b"v", None).await;
    assert!(
        matches!(typed, Err(LockError::WrongType { .. })),
        "{typed:?}"
    );
    second.release().await.expect("ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_write_through_the_fence_on_redis() {
    rust_api(Server::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_write_through_the_fence_on_valkey() {
    rust_api(Server::Valkey).await;
}

#[test]
fn the_record_key_shares_the_slot_and_never_a_lock_counter() {
    let record = |k: &str| RedisFences::record_key(k).expect(k);
    assert_eq!(record("acct"), "{acct}:distlock-accepted");
    assert_eq!(
        record("{user1}:cart"),
        "{user1}:distlock-accepted:{user1}:cart"
    );
    assert_eq!(record("{{a}}"), "{{a}:distlock-accepted:{{a}}");
    assert_ne!(record("x"), record("{x}"));
    for key in ["acct", "{user1}:cart", "a{b}c", "{{a}}", "a{b"] {
        assert_eq!(
            lock_redis::key_slot(&record(key)),
            lock_redis::key_slot(key),
            "{key}"
        );
    }
    let lock = RedisLock::builder()
        .url("redis://127.0.0.1:1/")
        .build()
        .expect("a reply");
    assert_ne!(record("acct"), lock.fence_key("acct"));
    assert!(RedisFences::record_key("a}b").is_err());
    assert!(RedisFences::record_key("").is_err());
    assert!(
        RedisFences::record_key("{}{x}").is_err(),
        "no tag (empty), and a }}"
    );
}

/// On a real Cluster: keys with and without a hash tag, no CROSSSLOT, and the record on the
/// key's node.
#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_on_a_cluster_land_in_the_keys_slot() {
    let cluster = Server::Redis.cluster();
    let lock = RedisLock::builder()
        .cluster_urls(cluster.urls())
        .connect_timeout(Duration::from_secs(3))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("a reply");
    let fences = lock.fences();
    let load = fences.load().await.expect("load on every master");
    assert!(load.uses_functions(), "{load:?}");
    let script = lock_redis::FencedScript::new("return redis.call('INCR', KEYS[1])");
    for (i, key) in ["acct", "{user1}:cart", "order:7", "{tenant}x"]
        .iter()
        .enumerate()
    {
        let fence = Fence::new(*key, 10 + i as u64);
        fences.set(&fence, b"v", None).await.expect(key);
        let stale = Fence::new(*key, 1);
        assert!(matches!(
            fences.set(&stale, b"w", None).await,
            Err(LockError::Fenced { .. })
        ));
        let counter = format!("{}:n", RedisFences::record_key(key).expect("a reply"));
        fences
            .run(&script, &fence, &[&counter], &[])
            .await
            .expect("a fenced script on the slot");
        let record = RedisFences::record_key(key).expect("a reply");
        let master = cluster
            .master_for_slot(lock_redis::key_slot(key))
            .expect("owner");
        let node = cluster.nodes()[master].server();
        assert_eq!(node.command(&["GET", key]).expect("a reply"), "v");
        assert_eq!(
            node.command(&["GET", &record]).expect("a reply"),
            (10 + i).to_string()
        );
        assert!(fences.del(&fence).await.expect("deleted"));
    }
    let again = fences.load().await.expect("load again");
    assert_eq!(
        again,
        LibraryLoad::Current {
            version: LIBRARY_VERSION
        }
    );
}

/// The library with another version number, as another distlock would load it.
fn library_at(version: i64) -> String {
    LIBRARY.replacen(
        &format!("local VERSION = {LIBRARY_VERSION}"),
        &format!("local VERSION = {version}"),
        1,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_library_is_kept_and_an_older_one_replaced() {
    let server = server();
    let fences = lock_on(&server).fences();
    assert_eq!(
        fences.load().await.expect("a reply"),
        LibraryLoad::Loaded {
            version: LIBRARY_VERSION
        }
    );
    assert_eq!(
        fences.load().await.expect("a reply"),
        LibraryLoad::Current {
            version: LIBRARY_VERSION
        }
    );
    let newer = library_at(LIBRARY_VERSION + 98);
    cli(&server, &["FUNCTION", "LOAD", "REPLACE", &newer]).expect("a reply");
    assert_eq!(
        fences.load().await.expect("a reply"),
        LibraryLoad::KeptNewer {
            newer: LIBRARY_VERSION + 98,
            version: LIBRARY_VERSION
        }
    );
    // A new lock's first write keeps it too.
    let fresh = lock_on(&server).fences();
    fresh
        .set(&Fence::new("k", 1), b"v", None)
        .await
        .expect("a reply");
    assert_eq!(
        cli(&server, &["FCALL_RO", "distlock_version", "0"]).expect("a reply"),
        (LIBRARY_VERSION + 98).to_string()
    );
    let older = library_at(LIBRARY_VERSION - 1);
    cli(&server, &["FUNCTION", "LOAD", "REPLACE", &older]).expect("a reply");
    let fresh = lock_on(&server).fences();
    fresh
        .set(&Fence::new("k", 2), b"v", None)
        .await
        .expect("a reply");
    assert_eq!(
        cli(&server, &["FCALL_RO", "distlock_version", "0"]).expect("a reply"),
        LIBRARY_VERSION.to_string(),
        "the first write of a new lock replaced the older library"
    );
    cli(&server, &["FUNCTION", "LOAD", "REPLACE", &older]).expect("a reply");
    assert_eq!(
        fences.load().await.expect("a reply"),
        LibraryLoad::Replaced {
            older: LIBRARY_VERSION - 1,
            version: LIBRARY_VERSION
        }
    );
}

/// An ACL user denied the `FUNCTION` command (and FCALL): the same code as EVALSHA scripts,
/// learned once; the contract (STALEFENCE, record key) is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_functions_the_scripts_fence_the_same_way() {
    let server = server();
    cli(
        &server,
        &[
            "ACL",
            "SETUSER",
            "nofn",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-function",
            "-fcall",
            "-fcall_ro",
        ],
    )
    .expect("a reply");
    let url = server.url().replace("redis://", "redis://nofn:pw@");
    let lock = RedisLock::builder()
        .url(url)
        .grace(Duration::ZERO)
        .build()
        .expect("a reply");
    let fences = lock.fences();
    let load = fences.load().await.expect("a reply");
    assert!(matches!(load, LibraryLoad::Unsupported { .. }), "{load:?}");
    let conn = raw(&server).await;
    let before = common::command_calls(&conn, "evalsha").await;
    fences
        .set(&Fence::new("acct", 5), b"a", None)
        .await
        .expect("a reply");
    fences
        .set(&Fence::new("acct", 5), b"b", None)
        .await
        .expect("a reply");
    let err = fences
        .set(&Fence::new("acct", 4), b"c", None)
        .await
        .expect_err("an error");
    assert!(
        matches!(err, LockError::Fenced { current: 5, .. }),
        "{err:?}"
    );
    assert!(common::command_calls(&conn, "evalsha").await >= before + 3);
    assert_eq!(common::command_calls(&conn, "fcall").await, 0);
    cli(&server, &["SCRIPT", "FLUSH"]).expect("a reply");
    assert!(
        fences.del(&Fence::new("acct", 6)).await.expect("a reply"),
        "reloaded after SCRIPT FLUSH"
    );
    assert_eq!(
        cli(&server, &["GET", "{acct}:distlock-accepted"]).expect("a reply"),
        "6"
    );
    // A lock that was never told: its first write learns it by itself.
    let url = server.url().replace("redis://", "redis://nofn:pw@");
    let other = RedisLock::builder()
        .url(url)
        .build()
        .expect("a reply")
        .fences();
    other
        .set(&Fence::new("acct", 7), b"d", None)
        .await
        .expect("a reply");
    // The same user, once an operator loaded the library: it is used (FCALL allowed then).
    cli(&server, &["ACL", "SETUSER", "nofn", "+fcall", "+fcall_ro"]).expect("a reply");
    cli(&server, &["FUNCTION", "LOAD", LIBRARY]).expect("a reply");
    let url = server.url().replace("redis://", "redis://nofn:pw@");
    let later = RedisLock::builder()
        .url(url)
        .build()
        .expect("a reply")
        .fences();
    assert_eq!(
        later.load().await.expect("a reply"),
        LibraryLoad::Current {
            version: LIBRARY_VERSION
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_flush_between_calls_reloads_the_library() {
    let server = server();
    let fences = lock_on(&server).fences();
    let conn = raw(&server).await;
    for token in 1..=3 {
        cli(&server, &["FUNCTION", "FLUSH"]).expect("a reply");
        cli(&server, &["SCRIPT", "FLUSH"]).expect("a reply");
        fences
            .set(&Fence::new("acct", token), b"v", None)
            .await
            .expect("reloaded");
    }
    assert!(common::command_calls(&conn, "fcall").await >= 3);
    assert!(
        cli(&server, &["FUNCTION", "LIST"])
            .expect("a reply")
            .contains("distlock")
    );
}

/// Through Sentinel: the master it names gets the library and the writes; the replica has the
/// library too (functions replicate).
#[cfg(feature = "sentinel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_through_sentinel() {
    let set = lock_testkit::RedisSentinelSet::start().expect("primary, replica and sentinels");
    let fences = RedisLock::builder()
        .sentinel(set.sentinel_urls(), set.master_name())
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(1))
        .grace(Duration::ZERO)
        .build()
        .expect("sentinel URLs")
        .fences();
    fences
        .set(&Fence::new("acct", 9), b"v", None)
        .await
        .expect("applied on the master");
    let stale = fences.set(&Fence::new("acct", 8), b"w", None).await;
    assert!(
        matches!(stale, Err(LockError::Fenced { current: 9, .. })),
        "{stale:?}"
    );
    let primary = set.primary_server().expect("the primary");
    assert_eq!(primary.command(&["GET", "acct"]).expect("GET"), "v");
    assert_eq!(
        primary
            .command(&["GET", "{acct}:distlock-accepted"])
            .expect("GET"),
        "9"
    );
}

/// 32 tasks writing at once on a lock's first use, then again after `FUNCTION FLUSH`: the
/// library is loaded once each time, not once per task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_writes_loads_the_library_once() {
    let server = server();
    let fences = lock_on(&server).fences();
    let conn = raw(&server).await;
    for round in 1..=2u64 {
        let tasks: Vec<_> = (0..32u64)
            .map(|t| {
                let fences = fences.clone();
                tokio::spawn(async move {
                    let fence = Fence::new(format!("burst:{t}"), round);
                    fences.set(&fence, b"v", None).await
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("no panic").expect("applied");
        }
        assert_eq!(
            common::command_calls(&conn, "function|load").await,
            round,
            "round {round}"
        );
        cli(&server, &["FUNCTION", "FLUSH"]).expect("FLUSH");
    }
}
