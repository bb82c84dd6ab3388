//! `PostgresAdvisoryLock`: the [`Lock`] backend on PostgreSQL session advisory locks.

pub(crate) mod builder;
mod key;
mod pooler;
mod session;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, LockError, Op, TimeoutPhase, Token, check_name, check_ttl, valid_until};
use tokio::time::Instant;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

pub use key::advisory_key;
pub use pooler::TransactionPooler;

use crate::error::{BACKEND, from_pg, timeout, unexpected};
use crate::lookalike::{Lookalike, UnsupportedServer};
use crate::pool::{client, discard};
use crate::sql::{
    ADVISORY_ACQUIRE, ADVISORY_HEARTBEAT, ADVISORY_IDLE_DEFAULT, ADVISORY_RELEASE, ADVISORY_VERSION,
};
use crate::statements::{Statements, run};
use pooler::pooler;
use session::{HeldSession, idle_timeout, session_gone};

/// The oldest PostgreSQL the advisory mode runs on: 14, the first with `idle_session_timeout`
/// (as `server_version_num`).
const MIN_SERVER_VERSION: i32 = 140_000;

/// A distributed lock on PostgreSQL (≥ 14) session advisory locks: `pg_try_advisory_lock` on
/// a pooled connection that is kept for as long as the lease is held. No table and no
/// migration.
///
/// Lock names map to keys as sqlx's `PgAdvisoryLock::new` maps them ([`advisory_key`]), so its
/// guards and sqlx's exclude each other (and any other client that locks the same `bigint`).
///
/// - **The lease is the session.** The lock is held while its connection's server session
///   lives; PostgreSQL releases it when the session ends (the client closed it, the process
///   crashed, `pg_terminate_backend`). The session's `idle_session_timeout` is set to the TTL
///   plus the statement timeout, so a process that stalls (or is cut off) loses its session,
///   and the lock, a little after its lease ran out on its own clock.
/// - **Extend** is a heartbeat on the held connection (which also sets
///   `idle_session_timeout` for the new TTL); a dead session answers "not ours".
/// - **Release** is `pg_advisory_unlock` on the held connection; its boolean is checked, and
///   the connection goes back to the pool only when it was `true`.
/// - **No fencing**: an advisory lock has no counter, so every lease's fencing token is 0.
///   Use the lease-table [`PostgresLock`](crate::PostgresLock) when the resource checks
///   fencing tokens.
/// - **No announcements**: a busy answer says `announces: false`, and waiters poll with the
///   locker's backoff.
/// - **No transaction-mode pooler** in between: detected when a lease's statements reach
///   another server process ([`TransactionPooler`]).
///
/// Every statement is bounded by the statement timeout and connecting by the connect timeout.
/// Each held lease keeps one pooled connection: the pool size bounds held leases plus attempts
/// in flight.
pub struct PostgresAdvisoryLock {
    pool: Pool,
    /// The held leases: (name, token) to the connection whose session holds the lock.
    held: Mutex<HashMap<(String, Token), Arc<HeldSession>>>,
    pub(crate) connect_timeout: Duration,
    pub(crate) statement_timeout: Duration,
    /// `host:port` of the server (never the password): the operator reads' `node`.
    node: String,
    /// The `idle_session_timeout` fresh sessions start with, read on the first acquire: what a
    /// release sets it back to before the connection returns to the pool.
    idle_default: std::sync::OnceLock<String>,
}

impl PostgresAdvisoryLock {
    fn assemble(
        pool: Pool,
        node: String,
        connect_timeout: Duration,
        statement_timeout: Duration,
    ) -> Self {
        Self {
            pool,
            held: Mutex::new(HashMap::new()),
            connect_timeout,
            statement_timeout,
            node,
            idle_default: std::sync::OnceLock::new(),
        }
    }

    /// The pool the lock takes its connections from.
    #[must_use]
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// How many leases this lock holds now (each keeps one connection).
    #[must_use]
    pub fn held_leases(&self) -> usize {
        self.map().len()
    }

    /// `host:port` of the server, for the operator reads.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// The backend pid of each session this lock holds a lease on, with the lease's name and
    /// token.
    pub(crate) fn held_sessions(&self) -> Vec<(i32, String, Token)> {
        self.map()
            .iter()
            .map(|((name, token), held)| (held.pid, name.clone(), *token))
            .collect()
    }

    /// What a release sets `idle_session_timeout` back to: the sessions' starting value
    /// (read before the first grant), or `0` (no limit, PostgreSQL's default) if it is unknown.
    fn idle_default_value(&self) -> &str {
        self.idle_default.get().map_or("0", String::as_str)
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Token), Arc<HeldSession>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lookup(&self, lease: &Lease) -> Option<Arc<HeldSession>> {
        self.map()
            .get(&(lease.name().to_owned(), *lease.token()))
            .cloned()
    }

    fn forget(&self, lease: &Lease) -> Option<Arc<HeldSession>> {
        self.map()
            .remove(&(lease.name().to_owned(), *lease.token()))
    }

    /// Runs one statement on `held`'s connection within the statement timeout, prepared once
    /// per pooled connection: this mode holds a session for each lease and refuses transaction
    /// poolers, so the session keeps its prepared statements (parsing and planning each call
    /// cost 27.5 µs of a 29 µs server share per cycle; load tool P1).
    async fn on_held(
        &self,
        held: &HeldSession,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Result<Vec<Row>, tokio_postgres::Error>, LockError> {
        let started = Instant::now();
        tokio::time::timeout(
            self.statement_timeout,
            run(held.client(), Statements::Prepared, sql, params),
        )
        .await
        .map_err(|_| timeout(TimeoutPhase::Command, started.elapsed()))
    }

    /// Takes the session lock on `held`'s connection, setting its `idle_session_timeout` to
    /// `idle` in the same statement: the session's server process and when the statement was
    /// sent, or `None` when another session holds the lock. Before the lock's first grant, it
    /// checks the server ([`Self::learn_server`]). On an error the session's state is unknown
    /// (it may hold the lock): the caller discards it.
    async fn take(
        &self,
        held: &HeldSession,
        idle: &str,
    ) -> Result<Option<(i32, Instant)>, LockError> {
        if self.idle_default.get().is_none() {
            self.learn_server(held).await?;
        }
        let started = Instant::now();
        let params: [(&(dyn ToSql + Sync), Type); 2] =
            [(&held.key, Type::INT8), (&idle, Type::TEXT)];
        // A session lock survives its statement's error: the caller's discard releases it.
        let rows = self
            .on_held(held, ADVISORY_ACQUIRE, &params)
            .await?
            .map_err(acquire_error)?;
        let read = |row: &Row| -> Result<(bool, i32), tokio_postgres::Error> {
            Ok((row.try_get(0)?, row.try_get(1)?))
        };
        let (got, pid) = match &rows[..] {
            [row] => read(row).map_err(|e| unexpected(Op::Acquire, e))?,
            _ => {
                return Err(unexpected(
                    Op::Acquire,
                    format!("{} rows from acquire", rows.len()),
                ));
            }
        };
        Ok(got.then_some((pid, started)))
    }

    /// Once per lock, on a session that has set nothing yet, before its first grant: reads the
    /// `idle_session_timeout` sessions start with, and refuses a look-alike by name (its
    /// advisory locks may not exclude at all) or a server older than 14.
    async fn learn_server(&self, held: &HeldSession) -> Result<(), LockError> {
        let rows = self
            .on_held(held, ADVISORY_IDLE_DEFAULT, &[])
            .await?
            .map_err(|err| from_pg(err, Op::Acquire))?;
        let _ = self.idle_default.set(server_setup(&rows)?);
        Ok(())
    }
}

/// The error of a failed acquire statement: a server without `idle_session_timeout` (older
/// than 14) is told so, and not retried.
fn acquire_error(err: tokio_postgres::Error) -> LockError {
    if err.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_OBJECT) {
        return LockError::Backend {
            backend: BACKEND,
            op: Op::Acquire,
            retryable: false,
            source: format!(
                "the advisory mode needs PostgreSQL 14 or later (idle_session_timeout): {}",
                crate::error::describe(&err)
            )
            .into(),
        };
    }
    from_pg(err, Op::Acquire)
}

#[async_trait]
impl Lock for PostgresAdvisoryLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// The database's advisory locks, this lock's own sessions among them (see
    /// [`Inspect`](lock_core::backend::Inspect)'s implementation on `PostgresAdvisoryLock`).
    fn inspector(&self) -> Option<&dyn lock_core::backend::Inspect> {
        Some(self)
    }

    /// The mutex only, the multi-lock one name after the other. Less than the full contract,
    /// by the nature of a session advisory lock: no fencing tokens (every grant carries 0:
    /// there is no counter beside the lock; use [`PostgresLock`](crate::PostgresLock) where a
    /// store checks tokens), and no release announcements (waiters poll).
    fn capabilities(&self) -> lock_core::backend::Capabilities {
        use lock_core::backend::{Capabilities, Fencing, MultiLock};
        Capabilities::MUTEX
            .with_multi(MultiLock::InOrder)
            .with_fencing(Fencing::None)
            .with_announcements(false)
            // The lock ends with its session: a crashed holder's lock is free at once, so a
            // lock-delay could not hold.
            .with_lock_delay(false)
    }

    /// `pg_try_advisory_lock(advisory_key(name))` on a pooled connection, kept for the lease
    /// when it answers `true` (with the session's `idle_session_timeout` set in the same
    /// statement). Busy answers carry no holder TTL and never announce.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it answered, the connection is closed, so the server
    /// releases a lock it may have taken.
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        check_name(name)?;
        let ttl_ms = check_ttl(ttl)?;
        let idle = idle_timeout(ttl_ms, self.statement_timeout)?;
        let key = advisory_key(name);
        let mut held = HeldSession::new(client(&self.pool, self.connect_timeout).await?, key);
        // The one discard path: whatever failed (a statement that timed out and may still run,
        // an error, a refused server), the session may hold the lock, so its connection is
        // closed and what it still runs cancelled.
        let taken = match self.take(&held, &idle).await {
            Ok(taken) => taken,
            Err(error) => {
                held.discard(self.connect_timeout);
                return Err(error);
            }
        };
        let Some((pid, started)) = taken else {
            held.mark_clean(); // nothing taken, nothing set: back to the pool
            return Ok(Attempt::Busy {
                holder_ttl: None,
                announces: false,
            });
        };
        held.pid = pid;
        self.map().insert((name.to_owned(), token), Arc::new(held));
        let valid = valid_until(started, Duration::from_millis(ttl_ms));
        Ok(Attempt::Acquired(Lease::new(name, token, 0, valid)))
    }

    /// A heartbeat on the held connection, which also sets its session's
    /// `idle_session_timeout` for `ttl`. `None` when the session is gone (it ended and took
    /// the lock with it) or the lease is unknown to this lock.
    ///
    /// # Errors
    /// [`LockError::Timeout`] when the heartbeat gets no reply within the statement timeout
    /// (the connection is kept: the session may be alive); [`LockError::Backend`] with a
    /// [`TransactionPooler`] source (the lease is then dropped).
    ///
    /// # Cancel safety
    /// Cancel safe: the lease stays held.
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let idle = idle_timeout(ttl_ms, self.statement_timeout)?;
        let Some(held) = self.lookup(lease) else {
            return Ok(None);
        };
        let started = Instant::now();
        match self
            .on_held(&held, ADVISORY_HEARTBEAT, &[(&idle.as_str(), Type::TEXT)])
            .await?
        {
            Ok(rows) => {
                let pid: i32 = rows
                    .first()
                    .ok_or_else(|| unexpected(Op::Extend, "no row from the heartbeat"))?
                    .try_get(0)
                    .map_err(|e| unexpected(Op::Extend, e))?;
                if pid != held.pid {
                    self.forget(lease);
                    return Err(pooler(held.pid, pid));
                }
                Ok(Some(valid_until(started, Duration::from_millis(ttl_ms))))
            }
            Err(err) if session_gone(&err, held.client()) => {
                self.forget(lease);
                Ok(None)
            }
            Err(err) => Err(from_pg(err, Op::Extend)),
        }
    }

    /// `pg_advisory_unlock` on the held connection, its boolean checked; the connection goes
    /// back to the pool (its `idle_session_timeout` reset) only when it answered `true`, and is
    /// closed otherwise. `false` when the session is gone or the lease is unknown.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the statement gets no reply or
    /// fails; the connection is closed then, and the server releases the lock when it sees
    /// the session end (at the latest at its `idle_session_timeout`).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the connection is closed and the lock released with its session.
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(held) = self.forget(lease) else {
            return Ok(false);
        };
        match self
            .on_held(
                &held,
                ADVISORY_RELEASE,
                &[
                    (&held.key, Type::INT8),
                    (&self.idle_default_value(), Type::TEXT),
                ],
            )
            .await
        {
            Ok(Ok(rows)) => {
                let read = |row: &Row| -> Result<(bool, i32), tokio_postgres::Error> {
                    Ok((row.try_get(0)?, row.try_get(1)?))
                };
                let (released, pid) = match &rows[..] {
                    [row] => read(row).map_err(|e| unexpected(Op::Release, e))?,
                    _ => {
                        return Err(unexpected(
                            Op::Release,
                            format!("{} rows from release", rows.len()),
                        ));
                    }
                };
                if pid != held.pid {
                    return Err(pooler(held.pid, pid));
                }
                if released && Arc::strong_count(&held) == 1 {
                    held.mark_clean();
                }
                Ok(released)
            }
            Ok(Err(err)) if session_gone(&err, held.client()) => Ok(false),
            Ok(Err(err)) => Err(from_pg(err, Op::Release)),
            Err(timed_out) => {
                if let Ok(held) = Arc::try_unwrap(held) {
                    held.discard(self.connect_timeout);
                }
                Err(timed_out)
            }
        }
    }

    /// Gets a connection (connecting if the pool has none) and checks that the server is
    /// PostgreSQL 14 or later and not a [`Lookalike`], both bounded by their timeouts.
    ///
    /// # Errors
    /// As [`Lock::ping`]; a non-retryable [`LockError::Backend`] for a server older than 14,
    /// or one whose source is [`UnsupportedServer`] for a look-alike (the first acquire
    /// refuses it the same way).
    async fn ping(&self) -> Result<(), LockError> {
        let client = client(&self.pool, self.connect_timeout).await?;
        let started = Instant::now();
        let rows = match tokio::time::timeout(
            self.statement_timeout,
            client.query_typed(ADVISORY_VERSION, &[]),
        )
        .await
        {
            Ok(Ok(rows)) => rows,
            Ok(Err(err)) => {
                if err.is_closed() {
                    drop(Object::take(client));
                }
                return Err(from_pg(err, Op::Connect));
            }
            Err(_) => {
                discard(client, self.connect_timeout);
                return Err(timeout(TimeoutPhase::Command, started.elapsed()));
            }
        };
        let (version, text): (i32, String) = rows
            .first()
            .and_then(|row| Some((row.try_get(0).ok()?, row.try_get(1).ok()?)))
            .ok_or_else(|| unexpected(Op::Connect, "no server_version_num"))?;
        if let Some(server) = Lookalike::detect(&text) {
            return Err(LockError::Backend {
                backend: BACKEND,
                op: Op::Connect,
                retryable: false,
                source: Box::new(UnsupportedServer {
                    server,
                    version: text,
                }),
            });
        }
        if version < MIN_SERVER_VERSION {
            return Err(LockError::Backend {
                backend: BACKEND,
                op: Op::Connect,
                retryable: false,
                source: format!(
                    "the advisory mode needs PostgreSQL 14 or later (idle_session_timeout); \
                     the server is version {version}"
                )
                .into(),
            });
        }
        Ok(())
    }
}

/// Reads the first acquire's `(idle_session_timeout, version())`: the setting's value, or the
/// refusal of a server the advisory mode cannot run on (a [`Lookalike`], or a PostgreSQL
/// without `idle_session_timeout`, i.e. older than 14).
fn server_setup(rows: &[Row]) -> Result<String, LockError> {
    let row = rows
        .first()
        .ok_or_else(|| unexpected(Op::Acquire, "no row from the session's settings"))?;
    let read = |row: &Row| -> Result<(Option<String>, String), tokio_postgres::Error> {
        Ok((row.try_get(0)?, row.try_get(1)?))
    };
    let (idle, version) = read(row).map_err(|e| unexpected(Op::Acquire, e))?;
    let refuse = |source: Box<dyn std::error::Error + Send + Sync>| LockError::Backend {
        backend: BACKEND,
        op: Op::Acquire,
        retryable: false,
        source,
    };
    if let Some(server) = Lookalike::detect(&version) {
        return Err(refuse(Box::new(UnsupportedServer { server, version })));
    }
    idle.ok_or_else(|| {
        refuse(
            format!(
                "the advisory mode needs PostgreSQL 14 or later (idle_session_timeout); the \
                 server is {version}"
            )
            .into(),
        )
    })
}

impl fmt::Debug for PostgresAdvisoryLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresAdvisoryLock")
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("held_leases", &self.held_leases())
            .finish_non_exhaustive()
    }
}
