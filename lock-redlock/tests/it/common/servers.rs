//! N throwaway redis-server processes (lock-testkit) and a Redlock over them.

use std::time::Duration;

use lock_redis::RedisLock;
use lock_redlock::{Redlock, RedlockBuilder};
use lock_testkit::RedisServer;
use redis::AsyncCommands as _;

/// The connect and command timeouts of the tests' RedisLocks: above the Redlock's node
/// timeouts (at most 500 ms), as the crate docs advise, so a hung node keeps its connection.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);

/// A bound for "fast" that a loaded 2-core machine still meets: the point is "not hung".
pub const FAST: Duration = Duration::from_secs(5);

/// N redis-servers, each killed by its PID when this is dropped.
pub struct Nodes {
    pub servers: Vec<RedisServer>,
}

impl Nodes {
    pub fn start(n: usize) -> Self {
        Self {
            servers: (0..n)
                .map(|_| RedisServer::start().expect("start redis-server"))
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    pub fn url(&self, i: usize) -> String {
        self.servers[i].url()
    }

    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }

    /// A Redlock over all the servers, with default settings.
    pub fn redlock(&self) -> Redlock {
        self.redlock_with(|b| b)
    }

    /// A Redlock over all the servers, adjusted by `adjust`.
    pub fn redlock_with(&self, adjust: impl FnOnce(RedlockBuilder) -> RedlockBuilder) -> Redlock {
        redlock_over(&self.urls(), adjust)
    }

    async fn conn(&self, i: usize) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url(i))
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect")
    }

    pub async fn get(&self, i: usize, key: &str) -> Option<String> {
        self.conn(i).await.get(key).await.expect("GET")
    }

    pub async fn exists(&self, i: usize, key: &str) -> bool {
        self.conn(i).await.exists(key).await.expect("EXISTS")
    }

    pub async fn pttl(&self, i: usize, key: &str) -> i64 {
        self.conn(i).await.pttl(key).await.expect("PTTL")
    }

    /// The fencing counter of `name` on node `i` (RedisLock's layout).
    pub async fn fence(&self, i: usize, name: &str) -> Option<u64> {
        let key = RedisLock::from_url(&self.url(i))
            .expect("url")
            .fence_key(name);
        self.conn(i).await.get(key).await.expect("GET fence")
    }

    /// Subscribers to the release channel of `name` on node `i` (RedisLock's layout).
    pub async fn subscribers(&self, i: usize, name: &str) -> i64 {
        let channel = RedisLock::from_url(&self.url(i))
            .expect("url")
            .release_channel(name);
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query_async(&mut self.conn(i).await)
            .await
            .expect("PUBSUB NUMSUB");
        counts.first().map_or(0, |(_, n)| *n)
    }

    /// Waits (at most 5 s, in 10 ms steps) until `key` is gone from every node in `live`.
    pub async fn wait_gone(&self, live: &[usize], key: &str) -> bool {
        for _ in 0..500 {
            let mut any = false;
            for &i in live {
                any |= self.exists(i, key).await;
            }
            if !any {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// The nodes in `of` whose `key` holds `token`.
    pub async fn holding(&self, of: &[usize], key: &str, token: &str) -> Vec<usize> {
        let mut out = Vec::new();
        for &i in of {
            if self.get(i, key).await.as_deref() == Some(token) {
                out.push(i);
            }
        }
        out
    }
}

/// A RedisLock on `url` with the tests' short client timeouts and no store grace period: the
/// tests that restart nodes show Redlock's own behaviour (`grace.rs` shows the grace's).
pub fn redis_lock(url: &str) -> RedisLock {
    RedisLock::builder()
        .url(url)
        .connect_timeout(CLIENT_TIMEOUT)
        .command_timeout(CLIENT_TIMEOUT)
        .grace(Duration::ZERO)
        .build()
        .expect("valid URL")
}

/// A Redlock over RedisLocks on `urls`, nodes labelled `n0`, `n1`, ...
pub fn redlock_over(
    urls: &[String],
    adjust: impl FnOnce(RedlockBuilder) -> RedlockBuilder,
) -> Redlock {
    let builder = urls
        .iter()
        .enumerate()
        .fold(Redlock::builder(), |b, (i, url)| {
            b.named_node(format!("n{i}"), redis_lock(url))
        });
    adjust(builder).build().expect("valid Redlock")
}

/// A paused (SIGSTOP) server, resumed (SIGCONT) when this is dropped, also on a panic.
pub struct Paused<'a>(pub &'a RedisServer);

impl<'a> Paused<'a> {
    pub fn pause(server: &'a RedisServer) -> Self {
        server.pause().expect("SIGSTOP");
        Self(server)
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        let _ = self.0.resume();
    }
}

/// The hex token of a lease, as the nodes store it.
pub fn token_hex(lease: &lock_core::Lease) -> String {
    lock_redis::token_value(lease.token()).as_str().to_owned()
}
