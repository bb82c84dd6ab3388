//! One multiplexed connection, taken from the pool and kept while it works.
//!
//! deadpool checks every connection it hands out with a `PING` round trip (`recycle`). A lock
//! operation is a single round trip, so getting a pooled connection per operation would double
//! its latency. Instead `Connections` takes one connection from the pool and shares it: a
//! redis-rs `MultiplexedConnection` is a cheap handle that pipelines the requests of every task
//! over one socket. When a command shows the connection broken (I/O error, timeout), it is
//! thrown away and the next operation takes a fresh one from the pool, which owns connecting,
//! credentials and the connect timeout.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use deadpool_redis::Pool;
use lock_core::{LockError, Op, TimeoutPhase};
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use crate::error::{BACKEND, timeout};

pub(crate) struct Connections {
    pool: Pool,
    connect_timeout: Duration,
    current: Mutex<Option<Held>>,
    /// Serialises refills so a broken connection is replaced once, not by every waiting task.
    refill: tokio::sync::Mutex<()>,
}

struct Held {
    /// Checked out of the pool for as long as we use it; returned when `Connections` drops.
    object: deadpool_redis::Connection,
    generation: u64,
}

/// A connection handle and the generation it came from (to discard exactly that one).
pub(crate) struct Conn {
    pub(crate) conn: MultiplexedConnection,
    generation: u64,
}

impl Connections {
    pub(crate) fn new(pool: Pool, connect_timeout: Duration) -> Self {
        Self {
            pool,
            connect_timeout,
            current: Mutex::new(None),
            refill: tokio::sync::Mutex::new(()),
        }
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    fn shared(&self) -> Option<Conn> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().map(|held| Conn {
            conn: (*held.object).clone(),
            generation: held.generation,
        })
    }

    /// The shared connection, connecting first if there is none.
    ///
    /// # Errors
    /// [`LockError::Timeout`] ([`TimeoutPhase::Connect`]) past the connect timeout;
    /// [`LockError::Backend`] when connecting fails (refused, wrong password).
    pub(crate) async fn get(&self) -> Result<Conn, LockError> {
        if let Some(conn) = self.shared() {
            return Ok(conn);
        }
        let started = Instant::now();
        let refilled = tokio::time::timeout(self.connect_timeout, async {
            let _refill = self.refill.lock().await;
            if let Some(conn) = self.shared() {
                return Ok(conn);
            }
            let object = self
                .pool
                .get()
                .await
                .map_err(|e| pool_error(e, started.elapsed()))?;
            let mut conn = (*object).clone();
            // Best effort: a user without SCRIPT rights still works, loading on NOSCRIPT.
            if let Err(error) = crate::scripts::load_all().exec_async(&mut conn).await {
                tracing::debug!(%error, "preloading the lock scripts failed");
            }
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            let generation = current.as_ref().map_or(0, |held| held.generation) + 1;
            *current = Some(Held { object, generation });
            Ok(Conn { conn, generation })
        })
        .await;
        refilled.unwrap_or_else(|_| Err(timeout(TimeoutPhase::Connect, started.elapsed())))
    }

    /// Throws away the connection `conn` came from, if it is still the shared one; it leaves the
    /// pool for good, so the next operation connects anew.
    pub(crate) fn discard(&self, conn: &Conn) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current
            .as_ref()
            .is_some_and(|held| held.generation == conn.generation)
            && let Some(held) = current.take()
        {
            drop(deadpool_redis::Connection::take(held.object));
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
