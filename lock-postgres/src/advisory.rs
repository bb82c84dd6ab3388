//! `PostgresAdvisoryLock`: the [`Lock`] backend on PostgreSQL session advisory locks.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use hkdf::Hkdf;
use lock_core::{
    Attempt, Lease, Lock, LockError, Op, TimeoutPhase, Token, check_name, check_ttl, valid_until,
};
use sha2::Sha256;
use tokio::time::Instant;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use crate::config::PostgresLockBuilder;
use crate::error::{BACKEND, from_pg, from_pool, timeout, unexpected};
use crate::postgres_lock::discard;
use crate::sql::{
    ADVISORY_ACQUIRE, ADVISORY_HEARTBEAT, ADVISORY_IDLE_DEFAULT, ADVISORY_RELEASE, ADVISORY_VERSION,
};

/// How many pooled connections a [`PostgresAdvisoryLock`] opens at most by default: 16. Each
/// held lease keeps one for as long as it is held.
pub const DEFAULT_ADVISORY_POOL_SIZE: usize = 16;

/// The oldest PostgreSQL the advisory mode runs on: 14, the first with `idle_session_timeout`
/// (as `server_version_num`).
const MIN_SERVER_VERSION: i32 = 140_000;

/// The HKDF "info" string sqlx ties its keys to.
const SQLX_INFO: &[u8] = b"SQLx (Rust) Postgres advisory lock";

/// The advisory-lock key of the lock name `name`, exactly as sqlx's
/// `PgAdvisoryLock::new(name)` computes it (its `PgAdvisoryLockKey::BigInt`): HKDF-SHA256
/// (RFC 5869) over the name's UTF-8 bytes, no salt, with the info string
/// `"SQLx (Rust) Postgres advisory lock"`, expanded to 8 bytes read as a little-endian `i64`.
/// So a [`PostgresAdvisoryLock`] guard and a sqlx `PgAdvisoryLock` on the same name exclude
/// each other. Negative keys are normal.
///
/// ```
/// // The example of sqlx's own documentation.
/// assert_eq!(
///     lock_postgres::advisory_key("my first Postgres advisory lock!"),
///     -5560419505042474287,
/// );
/// ```
#[must_use]
pub fn advisory_key(name: &str) -> i64 {
    let hkdf = Hkdf::<Sha256>::new(None, name.as_bytes());
    let mut key = [0u8; 8];
    hkdf.expand(SQLX_INFO, &mut key)
        .expect("8 bytes is a valid HKDF-SHA256 output length");
    i64::from_le_bytes(key)
}

/// The source of the [`LockError::Backend`] (not retryable) that a [`PostgresAdvisoryLock`]
/// returns when a held lease's statements ran on another server session than its acquire: a
/// connection pooler in transaction mode (PgBouncer `pool_mode = transaction`) sits between
/// the lock and PostgreSQL. Session advisory locks cannot work there; the lease is dropped.
/// Point the advisory mode at PostgreSQL directly or at a session-mode pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionPooler {
    /// The server process (`pg_backend_pid()`) that took the lock.
    pub acquired_on: i32,
    /// The server process the later statement ran on.
    pub now_on: i32,
}

impl fmt::Display for TransactionPooler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the advisory lock was taken by server process {} but its connection now runs on \
             process {}: a pooler in transaction mode is in between, where session advisory \
             locks do not work; connect the advisory mode to PostgreSQL directly or through a \
             session-mode pool",
            self.acquired_on, self.now_on
        )
    }
}

impl std::error::Error for TransactionPooler {}

/// Configures a [`PostgresAdvisoryLock`]; from [`PostgresAdvisoryLock::builder`]. The
/// connection settings are those of [`PostgresLockBuilder`].
///
/// ```
/// use std::time::Duration;
/// use lock_postgres::PostgresAdvisoryLock;
///
/// let lock = PostgresAdvisoryLock::builder()
///     .url("postgres://locker:secret@db.internal:5432/app")
///     .statement_timeout(Duration::from_millis(500))
///     .pool_size(32)
///     .build()?;
/// # drop(lock);
/// # Ok::<(), lock_postgres::LockError>(())
/// ```
#[derive(Debug, Default)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PostgresAdvisoryLockBuilder {
    inner: PostgresLockBuilder,
}

impl PostgresAdvisoryLockBuilder {
    /// Lock on the database at `url` (see [`PostgresLockBuilder::url`]). It must reach
    /// PostgreSQL directly or through a session-mode pool (see [`TransactionPooler`]).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.inner = self.inner.url(url);
        self
    }

    /// Lock on the database this client configuration names.
    pub fn config(mut self, config: tokio_postgres::Config) -> Self {
        self.inner = self.inner.config(config);
        self
    }

    /// Lock through this pool of yours. Each held lease keeps one of its connections, and
    /// gives it back only after a successful release.
    pub fn pool(mut self, pool: Pool) -> Self {
        self.inner = self.inner.pool(pool);
        self
    }

    /// How long getting a connection may take, connecting and authenticating included
    /// (default [`DEFAULT_CONNECT_TIMEOUT`](crate::DEFAULT_CONNECT_TIMEOUT)). Past it an
    /// operation fails with a `Connect` timeout, as it does when every pooled connection holds
    /// a lease.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.inner = self.inner.connect_timeout(timeout);
        self
    }

    /// How long one statement may wait for its reply (default
    /// [`DEFAULT_STATEMENT_TIMEOUT`](crate::DEFAULT_STATEMENT_TIMEOUT)), enforced by the
    /// client. A held session's `idle_session_timeout` is its lease's TTL plus this.
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.inner = self.inner.statement_timeout(timeout);
        self
    }

    /// How many pooled connections the lock opens at most (default
    /// [`DEFAULT_ADVISORY_POOL_SIZE`]): held leases plus attempts in flight. Ignored with a
    /// [`pool`](Self::pool) of yours.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.inner = self.inner.pool_size(size);
        self
    }

    /// The lock. Makes no connection yet: the first operation connects.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] as [`PostgresLockBuilder::build`] says.
    pub fn build(self) -> Result<PostgresAdvisoryLock, LockError> {
        let settings = self.inner.resolve(DEFAULT_ADVISORY_POOL_SIZE)?;
        Ok(PostgresAdvisoryLock {
            pool: settings.pool,
            held: Mutex::new(HashMap::new()),
            connect_timeout: settings.connect_timeout,
            statement_timeout: settings.statement_timeout,
            idle_default: std::sync::OnceLock::new(),
        })
    }
}

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
    held: Mutex<HashMap<(String, Token), Arc<Held>>>,
    connect_timeout: Duration,
    statement_timeout: Duration,
    /// The `idle_session_timeout` fresh sessions start with, read on the first acquire: what a
    /// release sets it back to before the connection returns to the pool.
    idle_default: std::sync::OnceLock<String>,
}

/// A connection whose session may hold an advisory lock. Dropped without being marked
/// `clean`, it is closed, not given back to the pool, so the server releases whatever its
/// session holds: the guard behind the cancel safety of every operation.
struct Held {
    client: Option<Object>,
    key: i64,
    /// `pg_backend_pid()` of the session that took the lock.
    pid: i32,
    clean: AtomicBool,
}

impl Held {
    fn new(client: Object, key: i64) -> Self {
        Self {
            client: Some(client),
            key,
            pid: 0,
            clean: AtomicBool::new(false),
        }
    }

    fn client(&self) -> &Object {
        self.client
            .as_ref()
            .expect("the client is only taken on drop or discard")
    }

    /// Gives the connection back to the pool when dropped: its session holds no lock.
    fn mark_clean(&self) {
        self.clean.store(true, Ordering::Release);
    }

    /// Closes the connection after a statement timed out, asking the server to cancel it.
    fn discard(mut self, limit: Duration) {
        if let Some(client) = self.client.take() {
            discard(client, limit);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !*self.clean.get_mut()
        {
            // Detached from the pool and dropped: the connection closes, the session ends.
            drop(Object::take(client));
        }
    }
}

/// Whether a failed statement means the session is gone (closed, terminated, shut down).
fn session_gone(err: &tokio_postgres::Error, client: &Object) -> bool {
    err.is_closed()
        || client.is_closed()
        || err
            .code()
            .is_some_and(|code| code.code().starts_with("57P"))
}

/// `idle_session_timeout` for a lease of `ttl_ms`: the TTL plus the statement timeout, in ms.
fn idle_timeout(ttl_ms: u64, statement: Duration) -> Result<String, LockError> {
    let ms = u128::from(ttl_ms) + statement.as_millis();
    if ms > i32::MAX as u128 {
        return Err(LockError::invalid(format!(
            "a TTL of {ttl_ms} ms is too long for the advisory mode: its idle_session_timeout \
             (TTL + statement timeout) must stay within {} ms (about 24.8 days)",
            i32::MAX
        )));
    }
    Ok(ms.to_string())
}

fn pooler(acquired_on: i32, now_on: i32) -> LockError {
    LockError::Backend {
        backend: BACKEND,
        op: Op::Extend,
        retryable: false,
        source: Box::new(TransactionPooler {
            acquired_on,
            now_on,
        }),
    }
}

impl PostgresAdvisoryLock {
    /// Starts configuring a lock; see [`PostgresAdvisoryLockBuilder`].
    pub fn builder() -> PostgresAdvisoryLockBuilder {
        PostgresAdvisoryLockBuilder::default()
    }

    /// A lock on the database at `url`, with default settings. Connects on first use.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when the URL does not parse.
    pub fn from_url(url: &str) -> Result<Self, LockError> {
        Self::builder().url(url).build()
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

    /// What a release sets `idle_session_timeout` back to: the sessions' starting value
    /// (read before the first grant), or `0` (no limit, PostgreSQL's default) if it is unknown.
    fn idle_default_value(&self) -> &str {
        self.idle_default.get().map_or("0", String::as_str)
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Token), Arc<Held>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lookup(&self, lease: &Lease) -> Option<Arc<Held>> {
        self.map()
            .get(&(lease.name().to_owned(), *lease.token()))
            .cloned()
    }

    fn forget(&self, lease: &Lease) -> Option<Arc<Held>> {
        self.map()
            .remove(&(lease.name().to_owned(), *lease.token()))
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

    /// Runs one statement on `held`'s connection within the statement timeout, prepared once
    /// per pooled connection: this mode holds a session for each lease and refuses transaction
    /// poolers, so the session keeps its prepared statements (parsing and planning each call
    /// cost 27.5 µs of a 29 µs server share per cycle; load tool P1).
    async fn on_held(
        &self,
        held: &Held,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Result<Vec<Row>, tokio_postgres::Error>, LockError> {
        let started = Instant::now();
        tokio::time::timeout(
            self.statement_timeout,
            crate::statements::run(
                held.client(),
                crate::statements::Statements::Prepared,
                sql,
                params,
            ),
        )
        .await
        .map_err(|_| timeout(TimeoutPhase::Command, started.elapsed()))
    }
}

#[async_trait]
impl Lock for PostgresAdvisoryLock {
    fn backend(&self) -> &'static str {
        BACKEND
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
        let mut held = Held::new(self.client().await?, key);
        if self.idle_default.get().is_none() {
            // Once per lock, on a session that has set nothing yet.
            match self.on_held(&held, ADVISORY_IDLE_DEFAULT, &[]).await {
                Ok(Ok(rows)) => {
                    let value = rows.first().map(|row| row.try_get::<_, String>(0));
                    match value {
                        Some(Ok(value)) => {
                            let _ = self.idle_default.set(value);
                        }
                        Some(Err(e)) => return Err(unexpected(Op::Acquire, e)),
                        None => return Err(unexpected(Op::Acquire, "no idle_session_timeout")),
                    }
                }
                Ok(Err(err)) => return Err(from_pg(err, Op::Acquire)),
                Err(timed_out) => {
                    held.discard(self.connect_timeout);
                    return Err(timed_out);
                }
            }
        }
        let started = Instant::now();
        let rows = match self
            .on_held(
                &held,
                ADVISORY_ACQUIRE,
                &[(&key, Type::INT8), (&idle.as_str(), Type::TEXT)],
            )
            .await
        {
            Ok(Ok(rows)) => rows,
            // Closing the connection releases a lock the statement may have taken (a session
            // lock survives its statement's error).
            Ok(Err(err)) => {
                drop(held);
                if err.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_OBJECT) {
                    return Err(LockError::Backend {
                        backend: BACKEND,
                        op: Op::Acquire,
                        retryable: false,
                        source: format!(
                            "the advisory mode needs PostgreSQL 14 or later \
                             (idle_session_timeout): {}",
                            crate::error::describe(&err)
                        )
                        .into(),
                    });
                }
                return Err(from_pg(err, Op::Acquire));
            }
            Err(timed_out) => {
                held.discard(self.connect_timeout);
                return Err(timed_out);
            }
        };
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
        if !got {
            held.mark_clean(); // nothing taken, nothing set: back to the pool
            return Ok(Attempt::Busy {
                holder_ttl: None,
                announces: false,
            });
        }
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
    /// PostgreSQL 14 or later, both bounded by their timeouts.
    ///
    /// # Errors
    /// As [`Lock::ping`]; a non-retryable [`LockError::Backend`] for a server older than 14.
    async fn ping(&self) -> Result<(), LockError> {
        let client = self.client().await?;
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
        let version: i32 = rows
            .first()
            .and_then(|row| row.try_get(0).ok())
            .ok_or_else(|| unexpected(Op::Connect, "no server_version_num"))?;
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

impl fmt::Debug for PostgresAdvisoryLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresAdvisoryLock")
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("held_leases", &self.held_leases())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sqlx_keys() {
        // sqlx's documented example (`PgAdvisoryLock::new`'s doc test).
        assert_eq!(
            advisory_key("my first Postgres advisory lock!"),
            -5_560_419_505_042_474_287
        );
        // tests/advisory_interop.rs compares many more names with sqlx itself.
        assert_ne!(advisory_key("order:42"), advisory_key("order:43"));
    }

    #[test]
    fn an_idle_timeout_is_the_ttl_plus_the_statement_timeout() {
        assert_eq!(
            idle_timeout(10_000, Duration::from_millis(500)).expect("fits"),
            "10500"
        );
        assert!(matches!(
            idle_timeout(u64::from(u32::MAX), Duration::from_secs(1)),
            Err(LockError::InvalidInput { .. })
        ));
    }
}
