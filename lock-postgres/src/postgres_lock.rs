//! `PostgresLock`: the [`Lock`] backend on a PostgreSQL lease table. The type, its operator
//! methods, and the `impl Lock` that picks the kind's functions (`kinds/`); construction lives
//! with its configuration (`config.rs`, which also holds `PostgresLock::builder`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use lock_core::backend::{Attempt, Handover, Holder, Lock, MultiAttempt, ReleaseWatch};
use lock_core::{Kind, Lease, LockError, Op, TimeoutPhase, Token, check_name, check_ttl};
use tokio::time::Instant;

use crate::error::{BACKEND, from_pg, timeout};
use crate::executor::Executor;
use crate::kinds::{self, fair, multi, mutex, note, read_write, semaphore};
use crate::listener::Listener;
use crate::pool::{client, discard};
use crate::sql::{MIGRATION, PING};
use crate::statements::Statements;

/// A distributed lock on PostgreSQL (≥ 12): one row per lock name in the lease table
/// [`distlock_leases`](crate::MIGRATION), through a `deadpool-postgres` pool.
///
/// Acquire, extend, release and hand-over are each one statement with typed parameters, in
/// one round trip. By default each is prepared once per pooled connection, so the server
/// parses and plans it once; behind a pooler that cannot keep prepared statements (PgBouncer
/// before 1.21 in transaction mode), turn that off with
/// [`PostgresLockBuilder::prepared_statements`]: each is then sent unnamed, and no session
/// state is held. Expiry is decided by the server's clock alone. Releases are announced with `pg_notify` in the same statement, and
/// waiters listen on one connection per `PostgresLock` and tokio runtime.
///
/// Fencing tokens are `max(server time in µs, last token of the name + 1)`, computed in the
/// acquire statement; the last token stays in the row after release and expiry. They strictly
/// increase per name across release, expiry and a server restart; see the crate docs for what
/// holds with `synchronous_commit = off` and when the server's clock steps back.
///
/// Every statement is bounded by the statement timeout and connecting by the connect timeout,
/// so a PostgreSQL that is down or hangs yields a typed error in bounded time.
///
/// [`PostgresLockBuilder::prepared_statements`]: crate::PostgresLockBuilder::prepared_statements
pub struct PostgresLock {
    /// The pool and the limits its statements run within.
    exec: Executor,
    /// Release announcements for waiters; `None` with announcements off, or a pool without a
    /// configuration.
    listener: Option<Listener>,
    /// `host:port` of the server (never the password): the operator reads' `node`.
    node: String,
}

impl PostgresLock {
    pub(crate) fn assemble(
        pool: Pool,
        node: String,
        listen: Option<tokio_postgres::Config>,
        connect_timeout: Duration,
        statement_timeout: Duration,
        statements: Statements,
    ) -> Self {
        Self {
            exec: Executor {
                pool,
                connect_timeout,
                statement_timeout,
                statements,
            },
            listener: listen
                .map(|config| Listener::new(config, connect_timeout + statement_timeout)),
            node,
        }
    }

    /// How the lock's statements run: the operator reads (`inspect/`) run theirs so too.
    pub(crate) fn executor(&self) -> &Executor {
        &self.exec
    }

    /// `host:port` of the server this lock connects to (a Unix socket's directory; never the
    /// password), or `postgres` for a lock made from a pool alone: the `node` its operator
    /// reads show.
    #[must_use]
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The listener's client configuration; `None` with announcements off.
    pub(crate) fn listen_config(&self) -> Option<&tokio_postgres::Config> {
        self.listener.as_ref().map(Listener::config)
    }

    /// Whether the lock prepares its statements (see
    /// [`PostgresLockBuilder::prepared_statements`]).
    ///
    /// [`PostgresLockBuilder::prepared_statements`]: crate::PostgresLockBuilder::prepared_statements
    #[must_use]
    pub fn prepared_statements(&self) -> bool {
        self.exec.statements == Statements::Prepared
    }

    /// How long getting a connection may take (see [`PostgresLockBuilder::connect_timeout`]).
    ///
    /// [`PostgresLockBuilder::connect_timeout`]: crate::PostgresLockBuilder::connect_timeout
    #[must_use]
    pub fn connect_timeout(&self) -> Duration {
        self.exec.connect_timeout
    }

    /// How long one statement may wait for its reply (see
    /// [`PostgresLockBuilder::statement_timeout`]).
    ///
    /// [`PostgresLockBuilder::statement_timeout`]: crate::PostgresLockBuilder::statement_timeout
    #[must_use]
    pub fn statement_timeout(&self) -> Duration {
        self.exec.statement_timeout
    }

    /// The pool the lock takes its connections from.
    #[must_use]
    pub fn pool(&self) -> &Pool {
        &self.exec.pool
    }

    /// Creates the lock's schema, or upgrades it in place to
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION): runs [`MIGRATION`](crate::MIGRATION), in one
    /// transaction (concurrent migrations take turns). Needs the right to create tables and
    /// functions in the connection's schema; a user without it runs the SQL through their own
    /// migration tool instead.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the database is unreachable, slow,
    /// or refuses (no `CREATE` right).
    ///
    /// # Cancel safety
    /// Cancel safe: the schema is created or not (one transaction).
    pub async fn migrate(&self) -> Result<(), LockError> {
        let client = client(&self.exec.pool, self.exec.connect_timeout).await?;
        let started = Instant::now();
        let done =
            tokio::time::timeout(self.exec.statement_timeout, client.batch_execute(MIGRATION))
                .await;
        match done {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(from_pg(err, Op::Connect)),
            Err(_) => {
                discard(client, self.exec.connect_timeout);
                Err(timeout(TimeoutPhase::Command, started.elapsed()))
            }
        }
    }
}

#[async_trait]
impl Lock for PostgresLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// The lease table's locks of every kind and the database's advisory locks (see
    /// [`Inspect`](lock_core::backend::Inspect)'s implementation on `PostgresLock`).
    fn inspector(&self) -> Option<&dyn lock_core::backend::Inspect> {
        Some(self)
    }

    /// Every kind: the mutex, the read-write lock, the semaphore and the fair lock (schema
    /// version 2, [`MIGRATION`](crate::MIGRATION)). The multi-lock in one statement. Strict fencing tokens per name, `greatest(counter + 1, clock in
    /// µs)`. Releases announced (`NOTIFY`) when the lock listens, i.e. unless built with
    /// [`announcements(false)`](crate::PostgresLockBuilder::announcements) or from a pool without a
    /// listening configuration.
    fn capabilities(&self) -> lock_core::backend::Capabilities {
        use lock_core::backend::{Capabilities, Fencing, MultiLock, TokenScale};
        Capabilities::MUTEX
            .with_read_write()
            .with_semaphore()
            .with_fair()
            .with_multi(MultiLock::Atomic)
            .with_fencing(Fencing::Strict(TokenScale::Clock))
            .with_announcements(self.listener.is_some())
            .with_holders(true)
            // `lock_postgres::fence`: `distlock_fence(resource, token)`.
            .with_guarded_writes(true)
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
        mutex::try_acquire(&self.exec, name, token, ttl_ms).await
    }

    /// Every kind, each one statement: the mutex through [`Lock::try_acquire`], the others
    /// through one call of their function (`distlock_read_acquire`, `distlock_write_acquire`,
    /// `distlock_semaphore_acquire`, `distlock_fair_acquire`; see `sql/migration.sql`).
    async fn try_acquire_read(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let kind = Kind::Read { writer_preference };
        read_write::try_acquire(&self.exec, name, kind, token, check_ttl(ttl)?).await
    }

    async fn try_acquire_write(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let kind = Kind::Write { writer_preference };
        read_write::try_acquire(&self.exec, name, kind, token, check_ttl(ttl)?).await
    }

    async fn try_acquire_semaphore(
        &self,
        name: &str,
        permits: u32,
        max: u32,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        semaphore::try_acquire(&self.exec, name, permits, max, token, ttl_ms).await
    }

    async fn try_acquire_fair(
        &self,
        name: &str,
        queued: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        fair::try_acquire(&self.exec, name, queued, token, check_ttl(ttl)?).await
    }

    /// Every name in one call of `distlock_multi_acquire`, all or none: one round trip, the
    /// rows locked in one global order (so overlapping multi-locks never deadlock).
    async fn try_acquire_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        for name in names {
            check_name(name)?;
        }
        let ttl_ms = check_ttl(ttl)?;
        multi::try_all_at_once(&self.exec, names, token, ttl_ms).await
    }

    /// The permits of the live holders of `name`: one `SELECT sum(permits)`.
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        check_name(name)?;
        semaphore::in_use(&self.exec, name).await
    }

    /// One `UPDATE … WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()` of the
    /// table the lease's kind lives in: its own row, no other holder's expiry moves.
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        kinds::extend(&self.exec, lease, ttl_ms).await
    }

    /// The leases of each table in one `UPDATE … FROM unnest(…)` statement (one for the mutex
    /// and fair leases, one for writers, readers, semaphore holders: only those present),
    /// answering for each as [`Lock::extend`] does. A TTL out of range fails that lease alone;
    /// a failing statement fails every lease of its table with the same error (the renewal
    /// retries them).
    ///
    /// # Cancel safety
    /// Cancel safe: each lease is left unchanged or extended.
    async fn extend_many(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Vec<Result<Option<Instant>, LockError>> {
        crate::batch::extend_many(&self.exec, leases).await
    }

    /// One `UPDATE` (token, expiry, next fencing token) if the lease is still ours.
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        mutex::hand_over(&self.exec, lease, to, ttl_ms).await
    }

    /// One statement of the lease's kind, announcing with `pg_notify` in the same statement:
    /// the mutex's `UPDATE … RETURNING`, a semaphore holder's `DELETE`, or one call of
    /// `distlock_rw_release` / `distlock_fair_release` (which also withdraw a waiting writer's
    /// record or a fair waiter's place).
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let exec = &self.exec;
        match lease.kind() {
            Kind::Read { .. } | Kind::Write { .. } => read_write::release(exec, lease).await,
            Kind::Semaphore { .. } => semaphore::release(exec, lease).await,
            // Fair leases tell the queue's head.
            Kind::Fair { .. } => fair::release(exec, lease).await,
            _ => mutex::release(exec, lease).await,
        }
    }

    /// Subscribes to the releases of `name` on the lock's shared listening connection (one per
    /// `PostgresLock` and runtime, serving every name); `None` with announcements off.
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        match &self.listener {
            Some(listener) => listener.watch(name).await,
            None => Ok(None),
        }
    }

    /// Subscribes to the turn of the fair waiter `token` on the shared listening connection: a
    /// fair release tells the queue's new head alone (`pg_notify('distlock_turn', token)`), so
    /// the other waiters sleep on. `None` with announcements off.
    async fn watch_turn(
        &self,
        name: &str,
        token: &Token,
    ) -> Result<Option<ReleaseWatch>, LockError> {
        let _ = name;
        match &self.listener {
            Some(listener) => listener.watch_turn(token.to_hex().as_str()).await,
            None => Ok(None),
        }
    }

    /// Gets a connection (connecting if the pool has none) and runs `SELECT 1`, both bounded
    /// by their timeouts.
    async fn ping(&self) -> Result<(), LockError> {
        self.exec.query(Op::Connect, PING, &[]).await.map(drop)
    }

    /// One `SELECT` of the lease row joined with the note its token wrote (schema version 3,
    /// table `distlock_notes`).
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        check_name(name)?;
        note::describe(&self.exec, name).await
    }

    /// One `INSERT … SELECT … ON CONFLICT` into `distlock_notes`, only while the lease's token
    /// holds the name. The mutex and the fair lock only (their lease rows).
    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        note::annotate(&self.exec, lease, note).await
    }
}

impl fmt::Debug for PostgresLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLock")
            .field("connect_timeout", &self.exec.connect_timeout)
            .field("statement_timeout", &self.exec.statement_timeout)
            .field("announcements", &self.listener.is_some())
            .field("prepared_statements", &self.prepared_statements())
            .finish_non_exhaustive()
    }
}
