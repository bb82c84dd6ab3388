//! Replication safety: after a grant and after each renewal, optionally wait until replicas
//! have the write (`WAIT numreplicas timeout`).
//!
//! What it does: a failover to a replica that confirmed the write keeps the lock, so a master
//! crash right after a grant no longer hands the lock to a second client. What it does not: WAIT
//! is not consensus. A replica that confirmed may still not be the one promoted; the write is in
//! the replica's memory, not on disk; and with `ReplicaPolicy::Warn` the lock is used anyway.
//! Pair it with fencing tokens, which order holders even when the lock was granted twice.

use std::time::Duration;

use lock_core::{LockError, Op, TimeoutPhase};

use crate::connection::conn::Handle;
use crate::error::{BACKEND, from_redis, timeout};

/// What to do when fewer replicas than asked confirm a lock write in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicaPolicy {
    /// Treat the write as failed: a grant is released and the acquire fails with a retryable
    /// [`LockError::Backend`] whose source is [`NotReplicated`]; a renewal counts as failed (it
    /// is retried while the lease lasts, then the lease is lost).
    Fail,
    /// Log a warning and go on as if confirmed.
    Warn,
}

/// Fewer replicas than asked confirmed a lock write in time; the `source` of the
/// [`LockError::Backend`] an acquire or extend fails with under [`ReplicaPolicy::Fail`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotReplicated {
    /// Replicas that confirmed.
    pub acked: u32,
    /// Replicas asked for.
    pub required: u32,
    /// How long `WAIT` waited.
    pub timeout: Duration,
}

impl std::fmt::Display for NotReplicated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} replicas confirmed the lock write within {:?}",
            self.acked, self.required, self.timeout
        )
    }
}

impl std::error::Error for NotReplicated {}

/// The replication requirement of a `RedisLock`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Replication {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
    pub(crate) policy: ReplicaPolicy,
}

impl Replication {
    /// Sends `WAIT` on the connection that made the write (on a cluster, to the master of the
    /// key's slot). `Ok(())` when enough replicas confirmed, or under [`ReplicaPolicy::Warn`].
    ///
    /// # Errors
    /// [`LockError::Backend`] with a [`NotReplicated`] source under [`ReplicaPolicy::Fail`];
    /// a timeout or backend error when `WAIT` itself fails.
    pub(crate) async fn confirm(
        &self,
        conn: &mut Handle,
        key: &str,
        command_timeout: Duration,
        op: Op,
    ) -> Result<(), LockError> {
        let timeout_ms = u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut wait = redis::cmd("WAIT");
        wait.arg(self.replicas).arg(timeout_ms);
        let started = tokio::time::Instant::now();
        let reply =
            tokio::time::timeout(self.timeout + command_timeout, send(conn, wait, key)).await;
        let acked = match reply {
            Ok(Ok(acked)) => acked,
            Ok(Err(err)) => return Err(from_redis(err, op, key, started.elapsed())),
            Err(_) => return Err(timeout(TimeoutPhase::Command, started.elapsed())),
        };
        if acked >= self.replicas {
            return Ok(());
        }
        let shortfall = NotReplicated {
            acked,
            required: self.replicas,
            timeout: self.timeout,
        };
        match self.policy {
            ReplicaPolicy::Warn => {
                tracing::warn!(key, %shortfall, "lock write not confirmed by enough replicas; going on");
                Ok(())
            }
            ReplicaPolicy::Fail => Err(LockError::Backend {
                backend: BACKEND,
                op,
                retryable: true,
                source: Box::new(shortfall),
            }),
        }
    }
}

async fn send(conn: &mut Handle, wait: redis::Cmd, key: &str) -> redis::RedisResult<u32> {
    #[cfg(not(feature = "cluster"))]
    let _ = key; // one server: WAIT goes where the write went, whatever the key
    match conn {
        Handle::Multiplexed(c) => wait.query_async(c).await,
        #[cfg(feature = "cluster")]
        Handle::Cluster(c) => {
            use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
            let route = Route::new(crate::layout::slot::key_slot(key), SlotAddr::Master);
            let value = c
                .route_command(
                    wait,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await?;
            Ok(redis::from_redis_value(value)?)
        }
    }
}
