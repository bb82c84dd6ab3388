//! How a lock runs its statements: a pooled connection within the connect timeout, the work
//! within the statement timeout, the connection closed when it timed out or broke; and grants
//! run so that they outlive a caller that is gone.

use std::time::Duration;

use futures::future::BoxFuture;
use lock_core::backend::Detached;
use lock_core::{LockError, Op, TimeoutPhase};
use sqlx::MySqlConnection;
use sqlx::mysql::{MySql, MySqlPool};
use sqlx::pool::PoolConnection;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::error::{BACKEND, from_sqlx, session_gone, timeout};

/// How long the direct connection attempt that explains a connect timeout may take.
const PROBE: Duration = Duration::from_millis(500);

/// The pool and the limits every statement of one lock runs within.
#[derive(Clone, Debug)]
pub(crate) struct Executor {
    pub(crate) pool: MySqlPool,
    pub(crate) connect_timeout: Duration,
    pub(crate) statement_timeout: Duration,
}

/// Work on one connection: a statement, or a kind's transaction.
pub(crate) type Work<T> = Box<
    dyn for<'c> FnOnce(&'c mut MySqlConnection) -> BoxFuture<'c, Result<T, sqlx::Error>> + Send,
>;

impl Executor {
    /// A pooled connection, within the connect timeout.
    pub(crate) async fn conn(&self) -> Result<PoolConnection<MySql>, LockError> {
        let started = Instant::now();
        match tokio::time::timeout(self.connect_timeout, self.pool.acquire()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(sqlx::Error::PoolTimedOut)) | Err(_) => {
                Err(self.why_no_connection(started).await)
            }
            Ok(Err(err)) => Err(from_sqlx(err, Op::Connect)),
        }
    }

    /// Why no connection came within the connect timeout. The pool tries a refused connection
    /// again until its timeout, which hides the refusal; one direct attempt, bounded by
    /// [`PROBE`], tells a refused port (a retryable backend error naming the refusal, as on
    /// every other backend) from a silent one or a pool whose connections are all busy (a
    /// connect timeout).
    async fn why_no_connection(&self, started: Instant) -> LockError {
        use sqlx::ConnectOptions as _;
        let options = self.pool.connect_options();
        match tokio::time::timeout(PROBE, options.connect()).await {
            Ok(Err(err)) => from_sqlx(err, Op::Connect),
            Ok(Ok(conn)) => {
                // The server answers: the pool was busy or slow. Closed, not kept.
                drop(conn);
                timeout(TimeoutPhase::Connect, started.elapsed())
            }
            Err(_) => timeout(TimeoutPhase::Connect, started.elapsed()),
        }
    }

    /// Runs `work` on a pooled connection within the statement timeout. A connection whose
    /// work timed out (its state unknown: a transaction may be open) or broke is closed, not
    /// given back to the pool.
    pub(crate) async fn run<T>(&self, op: Op, work: Work<T>) -> Result<T, LockError> {
        let mut conn = self.conn().await?;
        self.run_on(&mut conn, op, work).await
    }

    /// [`Self::run`] on a connection the caller holds.
    pub(crate) async fn run_on<T>(
        &self,
        conn: &mut PoolConnection<MySql>,
        op: Op,
        work: Work<T>,
    ) -> Result<T, LockError> {
        let started = Instant::now();
        let done = tokio::time::timeout(self.statement_timeout, work(&mut *conn)).await;
        match done {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                if session_gone(&err) {
                    conn.close_on_drop();
                }
                Err(from_sqlx(err, op))
            }
            Err(_) => {
                conn.close_on_drop();
                Err(timeout(TimeoutPhase::Command, started.elapsed()))
            }
        }
    }

    /// Runs a statement that may grant a lease (or record a waiter) and waits for its answer.
    /// The work runs in the caller's task while the caller waits (no task spawned on the way of
    /// every acquire); what is left of it when the caller is gone goes on in a task of its own
    /// ([`Detached`]), and gives back what the grant left behind (`left_behind` says whether it
    /// did) with `undo`, after the grant has answered, so the undo can never overtake the grant.
    pub(crate) async fn grant<T: Send + 'static>(
        &self,
        work: BoxFuture<'static, Result<T, LockError>>,
        left_behind: fn(&T) -> bool,
        undo: impl FnOnce(Executor) -> BoxFuture<'static, ()> + Send + 'static,
    ) -> Result<T, LockError> {
        let (answer, mut answered) = oneshot::channel();
        let exec = self.clone();
        let mut work = Detached::future(async move {
            let result = work.await;
            if let Err(Ok(value)) = answer.send(result)
                && left_behind(&value)
            {
                undo(exec).await;
            }
        });
        let got = tokio::select! {
            biased;
            got = &mut answered => got,
            () = &mut work => (&mut answered).await,
        };
        drop(work); // unfinished (the caller took the answer early): it goes on by itself
        got.unwrap_or_else(|_| {
            Err(LockError::Backend {
                backend: BACKEND,
                op: Op::Acquire,
                retryable: true,
                source: "the grant's task ended without an answer".into(),
            })
        })
    }
}

/// A TTL in milliseconds as the `BIGINT` parameter the statements take (`check_ttl` caps a TTL
/// at 2^53 - 1 ms, so nothing is cut).
pub(crate) fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}
