//! `PostgresLock`: the [`Lock`] backend on a PostgreSQL lease table.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use lock_core::{
    Attempt, Handover, Lease, Lock, LockError, Op, ReleaseWatch, TimeoutPhase, Token, check_name,
    check_ttl, valid_until,
};
use tokio::time::Instant;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{NoTls, Row};

use crate::config::PostgresLockBuilder;
use crate::error::{BACKEND, from_pg, from_pool, timeout, unexpected};
use crate::listener::Listener;
use crate::sql::{ACQUIRE, CHANNEL, EXTEND, HAND_OVER, MIGRATION, PING, RELEASE};

/// A distributed lock on PostgreSQL (≥ 12): one row per lock name in the lease table
/// [`distlock_leases`](crate::MIGRATION), through a `deadpool-postgres` pool.
///
/// Acquire, extend, release and hand-over are each one statement, sent as an unnamed
/// statement with typed parameters in one round trip (no prepared statement or other session
/// state, so a PgBouncer in transaction mode in between is fine). Expiry is decided by the
/// server's clock alone. Releases are announced with `pg_notify` in the same statement, and
/// waiters listen on one connection per `PostgresLock` and tokio runtime.
///
/// Fencing tokens are `max(server time in µs, last token of the name + 1)`, computed in the
/// acquire statement; the last token stays in the row after release and expiry. They strictly
/// increase per name across release, expiry and a server restart; see the crate docs for what
/// holds with `synchronous_commit = off` and when the server's clock steps back.
///
/// Every statement is bounded by the statement timeout and connecting by the connect timeout,
/// so a PostgreSQL that is down or hangs yields a typed error in bounded time.
pub struct PostgresLock {
    pool: Pool,
    /// Release announcements for waiters; `None` with announcements off, or a pool without a
    /// configuration.
    listener: Option<Listener>,
    connect_timeout: Duration,
    statement_timeout: Duration,
}

impl PostgresLock {
    /// Starts configuring a lock; see [`PostgresLockBuilder`].
    pub fn builder() -> PostgresLockBuilder {
        PostgresLockBuilder::default()
    }

    /// A lock on the database at `url`, with default settings. Connects on first use.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when the URL does not parse.
    pub fn from_url(url: &str) -> Result<Self, LockError> {
        Self::builder().url(url).build()
    }

    pub(crate) fn assemble(
        pool: Pool,
        listen: Option<tokio_postgres::Config>,
        connect_timeout: Duration,
        statement_timeout: Duration,
    ) -> Self {
        Self {
            pool,
            listener: listen
                .map(|config| Listener::new(config, connect_timeout + statement_timeout)),
            connect_timeout,
            statement_timeout,
        }
    }

    /// How long getting a connection may take (see [`PostgresLockBuilder::connect_timeout`]).
    #[must_use]
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// How long one statement may wait for its reply (see
    /// [`PostgresLockBuilder::statement_timeout`]).
    #[must_use]
    pub fn statement_timeout(&self) -> Duration {
        self.statement_timeout
    }

    /// The pool the lock takes its connections from.
    #[must_use]
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Creates the lease table if it does not exist: runs [`MIGRATION`](crate::MIGRATION).
    /// Needs the right to create a table in the connection's schema; a user without it runs
    /// the SQL through their own migration tool instead.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the database is unreachable, slow,
    /// or refuses (no `CREATE` right).
    ///
    /// # Cancel safety
    /// Cancel safe: the table is created or not (it is one statement).
    pub async fn migrate(&self) -> Result<(), LockError> {
        let client = self.client().await?;
        let started = Instant::now();
        let done =
            tokio::time::timeout(self.statement_timeout, client.batch_execute(MIGRATION)).await;
        match done {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(from_pg(err, Op::Connect)),
            Err(_) => {
                discard(client, self.connect_timeout);
                Err(timeout(TimeoutPhase::Command, started.elapsed()))
            }
        }
    }

    /// A pooled connection, within the connect timeout.
    async fn client(&self) -> Result<Object, LockError> {
        let started = Instant::now();
        match tokio::time::timeout(self.connect_timeout, self.pool.get()).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(err)) => Err(from_pool(err, started.elapsed())),
            Err(_) => Err(timeout(TimeoutPhase::Connect, started.elapsed())),
        }
    }

    /// Runs one statement (unnamed, typed parameters: one round trip) within the statement
    /// timeout, dropping the connection when it timed out or broke.
    async fn query(
        &self,
        op: Op,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, LockError> {
        let client = self.client().await?;
        let started = Instant::now();
        match tokio::time::timeout(self.statement_timeout, client.query_typed(sql, params)).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(err)) => {
                if err.is_closed() {
                    drop(Object::take(client));
                }
                Err(from_pg(err, op))
            }
            Err(_) => {
                discard(client, self.connect_timeout);
                Err(timeout(TimeoutPhase::Command, started.elapsed()))
            }
        }
    }
}

/// Throws away a connection whose statement timed out (its state is unknown) and asks the
/// server, in the background and bounded by `limit`, to cancel what it still runs.
fn discard(client: Object, limit: Duration) {
    let cancel = client.cancel_token();
    drop(Object::take(client));
    drop(tokio::spawn(async move {
        let _ = tokio::time::timeout(limit, cancel.cancel_query(NoTls)).await;
    }));
}

fn millis(ms: u64) -> i64 {
    // check_ttl caps a TTL at 2^53 - 1 ms.
    i64::try_from(ms).unwrap_or(i64::MAX)
}

#[async_trait]
impl Lock for PostgresLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// One `INSERT … ON CONFLICT (name) DO UPDATE … RETURNING` (see the crate docs).
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        check_name(name)?;
        let ttl_ms = check_ttl(ttl)?;
        let started = Instant::now();
        let (hex, ms) = (token.to_hex(), millis(ttl_ms));
        let rows = self
            .query(
                Op::Acquire,
                ACQUIRE,
                &[
                    (&name, Type::TEXT),
                    (&hex.as_str(), Type::TEXT),
                    (&ms, Type::INT8),
                ],
            )
            .await?;
        let [row] = &rows[..] else {
            return Err(unexpected(
                Op::Acquire,
                format!("{} rows from acquire", rows.len()),
            ));
        };
        let read = |row: &Row| -> Result<(bool, i64, i64), tokio_postgres::Error> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        };
        let (ours, fencing_token, left_ms) = read(row).map_err(|e| unexpected(Op::Acquire, e))?;
        if ours {
            let fencing_token = u64::try_from(fencing_token).unwrap_or(0);
            let valid = valid_until(started, Duration::from_millis(ttl_ms));
            Ok(Attempt::Acquired(Lease::new(
                name,
                token,
                fencing_token,
                valid,
            )))
        } else {
            Ok(Attempt::Busy {
                holder_ttl: Some(Duration::from_millis(
                    u64::try_from(left_ms).unwrap_or_default(),
                )),
                // Every row is a distlock holder's, and every release is announced.
                announces: true,
            })
        }
    }

    /// One `UPDATE … WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()`.
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let started = Instant::now();
        let (hex, ms) = (lease.token().to_hex(), millis(ttl_ms));
        let rows = self
            .query(
                Op::Extend,
                EXTEND,
                &[
                    (&lease.name(), Type::TEXT),
                    (&hex.as_str(), Type::TEXT),
                    (&ms, Type::INT8),
                ],
            )
            .await?;
        Ok((!rows.is_empty()).then(|| valid_until(started, Duration::from_millis(ttl_ms))))
    }

    /// One `UPDATE` (token, expiry, next fencing token) if the lease is still ours.
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let started = Instant::now();
        let (from, to_hex, ms) = (lease.token().to_hex(), to.to_hex(), millis(ttl_ms));
        let rows = self
            .query(
                Op::Acquire,
                HAND_OVER,
                &[
                    (&lease.name(), Type::TEXT),
                    (&from.as_str(), Type::TEXT),
                    (&to_hex.as_str(), Type::TEXT),
                    (&ms, Type::INT8),
                ],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(Handover::NotOwned);
        };
        let fencing_token: i64 = row.try_get(0).map_err(|e| unexpected(Op::Acquire, e))?;
        let valid = valid_until(started, Duration::from_millis(ttl_ms));
        Ok(Handover::Handed(Lease::new(
            lease.name(),
            to,
            u64::try_from(fencing_token).unwrap_or(0),
            valid,
        )))
    }

    /// One `UPDATE … RETURNING` with `pg_notify` on the released row, in one statement.
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let hex = lease.token().to_hex();
        let rows = self
            .query(
                Op::Release,
                RELEASE,
                &[
                    (&lease.name(), Type::TEXT),
                    (&hex.as_str(), Type::TEXT),
                    (&CHANNEL, Type::TEXT),
                ],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// Subscribes to the releases of `name` on the lock's shared listening connection (one per
    /// `PostgresLock` and runtime, serving every name); `None` with announcements off.
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        match &self.listener {
            Some(listener) => listener.watch(name).await.map(Some),
            None => Ok(None),
        }
    }

    /// Gets a connection (connecting if the pool has none) and runs `SELECT 1`, both bounded
    /// by their timeouts.
    async fn ping(&self) -> Result<(), LockError> {
        self.query(Op::Connect, PING, &[]).await.map(drop)
    }
}

impl fmt::Debug for PostgresLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLock")
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("announcements", &self.listener.is_some())
            .finish_non_exhaustive()
    }
}
