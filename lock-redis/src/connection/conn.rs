//! One connection, taken from the pool and kept while it works.
//!
//! deadpool checks every connection it hands out with a `PING` round trip (`recycle`). A lock
//! operation is a single round trip, so getting a pooled connection per operation would double
//! its latency. Instead `Connections` takes one connection from the pool and shares it: a
//! redis-rs `MultiplexedConnection` (one server, or the master a sentinel names) or
//! `ClusterConnection` is a cheap handle that pipelines the requests of every task. When a
//! command shows the connection broken (I/O error, timeout, a demoted master answering
//! READONLY), it is thrown away and the next operation takes a fresh one from the pool, which
//! owns connecting, credentials, master discovery and the connect timeout.
//!
//! A redis-rs connection is driven by a task on the runtime that made it, and dies with that
//! runtime. One `RedisLock` may be used from several runtimes, in sequence (every
//! `#[tokio::test]` has its own) or at once, so it shares one connection **per runtime**: a
//! runtime's operations never ride on a connection another runtime drives, so a runtime that
//! shuts down breaks no command of another (a shared connection did, with "broken pipe", when
//! its runtime ended mid-command). A runtime's connection is dropped once that runtime is gone
//! (a [`PerRuntime`] tells), and leaves the pool for good then.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::backend::PerRuntime;
use lock_core::{LockError, Op, TimeoutPhase};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tokio::time::Instant;

use crate::error::{BACKEND, timeout};
use crate::safety::grace::GraceState;
use crate::topology::Topology;

/// Where connections come from.
pub(crate) enum Source {
    /// One Redis server.
    Single(deadpool_redis::Pool),
    /// A Redis Cluster.
    #[cfg(feature = "cluster")]
    Cluster(deadpool_redis::cluster::Pool),
    /// The master a set of sentinels names.
    #[cfg(feature = "sentinel")]
    Sentinel(deadpool_redis::sentinel::Pool),
}

/// A pooled connection, checked out for as long as we use it.
enum Pooled {
    Single(deadpool_redis::Connection),
    #[cfg(feature = "cluster")]
    Cluster(deadpool_redis::cluster::Connection),
    #[cfg(feature = "sentinel")]
    Sentinel(deadpool_redis::sentinel::Connection),
}

impl Pooled {
    fn handle(&self) -> Handle {
        match self {
            Self::Single(c) => Handle::Multiplexed((**c).clone()),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => Handle::Cluster((**c).clone()),
            #[cfg(feature = "sentinel")]
            Self::Sentinel(c) => Handle::Multiplexed((**c).clone()),
        }
    }

    /// Takes the connection out of the pool for good (it is broken).
    fn discard(self) {
        match self {
            Self::Single(c) => drop(deadpool_redis::Connection::take(c)),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => drop(deadpool_redis::cluster::Connection::take(c)),
            #[cfg(feature = "sentinel")]
            Self::Sentinel(c) => drop(deadpool_redis::sentinel::Connection::take(c)),
        }
    }
}

/// A cheap handle to the shared connection; clones share the socket(s).
#[derive(Clone)]
pub(crate) enum Handle {
    Multiplexed(MultiplexedConnection),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl ConnectionLike for Handle {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Multiplexed(c) => c.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Multiplexed(c) => c.req_packed_commands(cmd, offset, count),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Multiplexed(c) => c.get_db(),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => c.get_db(),
        }
    }
}

pub(crate) struct Connections {
    source: Source,
    connect_timeout: Duration,
    /// The shared connection of each runtime that uses this lock; one whose runtime is gone
    /// leaves the pool for good.
    current: PerRuntime<HeldConnection>,
    /// Serialises refills so a broken connection is replaced once, not by every waiting task.
    refill: tokio::sync::Mutex<()>,
    /// Numbers the connections, so a discard drops exactly the one that failed.
    next_generation: AtomicU64,
    /// What the server said about itself on each new connection, and its grace period.
    grace: GraceState,
    /// On a Redis Cluster: every node's facts and grace period, and who owns which slots.
    #[cfg(feature = "cluster")]
    cluster: Option<crate::safety::cluster_grace::ClusterGrace>,
}

struct HeldConnection {
    pooled: Pooled,
    generation: u64,
}

impl HeldConnection {
    /// A handle to it, for one operation.
    fn conn(&self) -> Conn {
        Conn {
            conn: self.pooled.handle(),
            generation: self.generation,
        }
    }

    /// Its runtime is gone, and the connection's driver with it.
    fn retire(self) {
        tracing::debug!("the runtime of a shared connection is gone; dropping it");
        self.pooled.discard();
    }
}

/// A connection handle and the generation it came from (to discard exactly that one).
pub(crate) struct Conn {
    pub(crate) conn: Handle,
    generation: u64,
}

impl Conn {
    /// Which connection this is: each one the lock makes gets the next number, from 1.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

impl Connections {
    pub(crate) fn new(source: Source, connect_timeout: Duration, grace: GraceState) -> Self {
        Self {
            source,
            connect_timeout,
            current: PerRuntime::with_retire(HeldConnection::retire),
            refill: tokio::sync::Mutex::new(()),
            next_generation: AtomicU64::new(0),
            grace,
            #[cfg(feature = "cluster")]
            cluster: None,
        }
    }

    /// On a Redis Cluster, watches every master's grace period (see `cluster_grace.rs`);
    /// `limit` bounds each refresh. Other deployments are left as they are.
    #[cfg(feature = "cluster")]
    pub(crate) fn with_cluster_grace(
        mut self,
        settings: crate::safety::grace::GraceSettings,
        prefix: &str,
        limit: Duration,
    ) -> Self {
        if matches!(self.source, Source::Cluster(_)) {
            self.cluster = Some(crate::safety::cluster_grace::ClusterGrace::new(
                settings, prefix, limit,
            ));
        }
        self
    }

    /// The cluster's grace state, on a Redis Cluster.
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster_grace(&self) -> Option<&crate::safety::cluster_grace::ClusterGrace> {
        self.cluster.as_ref()
    }

    /// The server's grace state, as the connections have learned it.
    pub(crate) fn grace(&self) -> &GraceState {
        &self.grace
    }

    /// Which kind of deployment the connections go to.
    pub(crate) fn topology(&self) -> Topology {
        match &self.source {
            Source::Single(_) => Topology::Single,
            #[cfg(feature = "cluster")]
            Source::Cluster(_) => Topology::Cluster,
            #[cfg(feature = "sentinel")]
            Source::Sentinel(_) => Topology::Sentinel,
        }
    }

    /// The generation of the newest connection made (0 before the first).
    pub(crate) fn newest_generation(&self) -> u64 {
        self.next_generation.load(Ordering::Relaxed)
    }

    /// The current runtime's shared connection, if it has one. Connections of runtimes that
    /// are gone are dropped here.
    fn shared(&self, runtime: tokio::runtime::Id) -> Option<Conn> {
        self.current.get(runtime, HeldConnection::conn)
    }

    /// The shared connection, connecting first if there is none.
    ///
    /// # Errors
    /// [`LockError::Timeout`] ([`TimeoutPhase::Connect`]) past the connect timeout;
    /// [`LockError::Backend`] when connecting fails (refused, wrong password, no master known).
    pub(crate) async fn get(&self) -> Result<Conn, LockError> {
        let runtime = tokio::runtime::Handle::current().id();
        if let Some(conn) = self.shared(runtime) {
            return Ok(conn);
        }
        // Boxed: connecting (pool checkout, TLS, the scripts' preload) is a ~7 KB future, and
        // held inline it made every lock operation's future that large, to be copied into the
        // backend's boxed future and allocated outside the allocator's small-size cache on every
        // call (callgrind: ~1,500 client instructions per acquire + release cycle).
        Box::pin(self.connect(runtime)).await
    }

    /// Connects the shared connection of `runtime`, unless another task just did.
    async fn connect(&self, runtime: tokio::runtime::Id) -> Result<Conn, LockError> {
        let started = Instant::now();
        let refilled = tokio::time::timeout(self.connect_timeout, async {
            let _refill = self.refill.lock().await;
            if let Some(conn) = self.shared(runtime) {
                return Ok(conn);
            }
            let pooled = self.checkout(started).await?;
            let mut handle = pooled.handle();
            // Best effort: a user without SCRIPT rights still works, loading on NOSCRIPT.
            if let Err(error) = crate::scripts::preload(&mut handle).await {
                tracing::debug!(%error, "preloading the lock scripts failed");
            }
            // Once per new connection, never per command: a restart or a failover always
            // breaks the connection, so the next one is where it shows.
            match &mut handle {
                Handle::Multiplexed(conn) => self.grace.learn(conn).await,
                // The first look at the cluster's nodes (a cluster connection re-routes after a
                // failover by itself, so later looks come from `Executor::grace_left`).
                #[cfg(feature = "cluster")]
                Handle::Cluster(conn) => {
                    if let Some(cluster) = &self.cluster
                        && !cluster.inert()
                    {
                        cluster.refresh(conn).await;
                    }
                }
            }
            let generation = self.next_generation.fetch_add(1, Ordering::Relaxed) + 1;
            // The refill lock is held: no other connection of this runtime came meanwhile.
            self.current
                .insert(HeldConnection { pooled, generation }, |_| ());
            Ok(Conn {
                conn: handle,
                generation,
            })
        })
        .await;
        refilled.unwrap_or_else(|_| Err(timeout(TimeoutPhase::Connect, started.elapsed())))
    }

    async fn checkout(&self, started: Instant) -> Result<Pooled, LockError> {
        let failed = |e| pool_error(e, started.elapsed());
        Ok(match &self.source {
            Source::Single(pool) => Pooled::Single(pool.get().await.map_err(failed)?),
            #[cfg(feature = "cluster")]
            Source::Cluster(pool) => Pooled::Cluster(pool.get().await.map_err(failed)?),
            #[cfg(feature = "sentinel")]
            Source::Sentinel(pool) => Pooled::Sentinel(pool.get().await.map_err(failed)?),
        })
    }

    /// Throws away the connection `conn` came from, if it is still the shared one; it leaves the
    /// pool for good, so the next operation connects anew.
    pub(crate) fn discard(&self, conn: &Conn) {
        let generation = conn.generation;
        if let Some(held) = self
            .current
            .remove_where(|held| held.generation == generation)
        {
            held.pooled.discard();
        }
    }
}

fn pool_error(err: deadpool_redis::PoolError, elapsed: Duration) -> LockError {
    use deadpool_redis::PoolError;
    match err {
        PoolError::Backend(err) => crate::error::from_redis(err, Op::Connect, "", elapsed),
        PoolError::Timeout(_) => timeout(TimeoutPhase::Connect, elapsed),
        other => LockError::Backend {
            backend: BACKEND,
            op: Op::Connect,
            retryable: !matches!(other, PoolError::Closed | PoolError::NoRuntimeSpecified),
            source: Box::new(other),
        },
    }
}
