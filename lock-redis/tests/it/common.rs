//! Helpers shared by the integration tests: a throwaway server, a lock on it, raw commands.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use lock_core::{Backoff, Guard, Locker};
use lock_redis::RedisLock;
use lock_testkit::RedisServer;
use redis::aio::MultiplexedConnection;

/// A fresh redis-server on a free loopback port, stopped by PID when dropped.
pub fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server")
}

/// A Valkey server (`scripts/ensure-valkey.sh` installs `valkey-server`).
pub fn valkey() -> RedisServer {
    RedisServer::builder()
        .valkey()
        .start()
        .expect("start valkey-server (scripts/ensure-valkey.sh installs it)")
}

/// A RedisLock on `server` with short timeouts, so failure tests finish fast, and no store grace
/// period: the tests that restart the server here are about errors and recovery; `grace.rs`
/// is about the grace.
pub fn lock_on(server: &RedisServer) -> RedisLock {
    RedisLock::builder()
        .url(server.url())
        .connect_timeout(Duration::from_millis(500))
        .command_timeout(Duration::from_millis(500))
        .grace(Duration::ZERO)
        .build()
        .expect("valid URL")
}

pub fn locker_on(server: &RedisServer) -> Locker {
    Locker::new(lock_on(server))
}

/// A locker on `lock` whose polling alone would take 10 s per try: a prompt grant came from a
/// wake-up (a release announcement), not from polling.
pub fn slow_polling(lock: RedisLock) -> Locker {
    Locker::builder(lock)
        .backoff(Backoff::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build()
}

/// [`slow_polling`] over a `RedisLock` of its own on `server` (its own connections and
/// subscriber, default timeouts): a locker standing in for one process.
pub fn slow_polling_on(server: &RedisServer) -> Locker {
    slow_polling(RedisLock::from_url(&server.url()).expect("url"))
}

/// A plain connection for inspecting and tampering with the server, independent of the lock.
pub async fn raw(server: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(server.url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

pub async fn get(conn: &mut MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(conn)
        .await
        .expect("GET")
}

pub async fn pttl(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("PTTL")
}

/// Whether `key` exists.
pub async fn exists(conn: &mut MultiplexedConnection, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<i64>(conn)
        .await
        .expect("EXISTS")
        == 1
}

/// The number of members of the sorted set `key` (a fair queue, a semaphore's holders).
pub async fn zcard(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("ZCARD")
        .arg(key)
        .query_async(conn)
        .await
        .expect("ZCARD")
}

/// `INCR key`: the count after this one.
pub async fn incr(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("INCR")
        .arg(key)
        .query_async(conn)
        .await
        .expect("INCR")
}

/// The token a guard stored, as Redis holds it.
pub fn token_of(guard: &Guard) -> String {
    lock_redis::token_value(guard.lease().token())
        .as_str()
        .to_owned()
}

/// Waits (bounded: at most 5 s, in 10 ms steps) until `key` is gone; false if it never goes.
pub async fn wait_until_gone(conn: &mut MultiplexedConnection, key: &str) -> bool {
    for _ in 0..500 {
        let exists: i64 = redis::cmd("EXISTS")
            .arg(key)
            .query_async(conn)
            .await
            .expect("EXISTS");
        if exists == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// How many times the server ran `command` (a `cmdstat_*` name such as `"pexpire"` or
/// `"script|load"`), scripts' inner calls included: from `INFO commandstats`.
pub async fn command_calls(conn: &MultiplexedConnection, command: &str) -> u64 {
    let mut conn = conn.clone();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// Which server a test runs on: `redis-server` (7.0 here) or `valkey-server` (9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Redis,
    Valkey,
}

impl Server {
    /// A fresh Redis Cluster (3 masters, 3 replicas) of this server.
    #[cfg(feature = "cluster")]
    pub fn cluster(self) -> lock_testkit::RedisCluster {
        let builder = lock_testkit::RedisCluster::builder();
        let builder = match self {
            Self::Redis => builder,
            Self::Valkey => builder.valkey(),
        };
        builder.start().expect("cluster")
    }

    /// A fresh primary, replica and three Sentinels of this server.
    #[cfg(feature = "sentinel")]
    pub fn sentinel_set(self) -> lock_testkit::RedisSentinelSet {
        let builder = lock_testkit::RedisSentinelSet::builder();
        let builder = match self {
            Self::Redis => builder,
            Self::Valkey => builder.valkey(),
        };
        builder.start().expect("primary, replica and sentinels")
    }
}

/// Each check (an `async fn(Server)` of the calling module) as a test on each server:
/// `redis_server::name` and `valkey_server::name`. (Its users are the cluster and Sentinel
/// modules, which build only with those features.)
#[allow(unused_macros)]
macro_rules! on_both_servers {
    ($($check:ident),+ $(,)?) => {
        mod redis_server {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(crate::common::Server::Redis).await;
                }
            )+
        }
        mod valkey_server {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(crate::common::Server::Valkey).await;
                }
            )+
        }
    };
}
#[allow(unused_imports)] // used by the `cluster` and `sentinel` modules, behind their features
pub(crate) use on_both_servers;
