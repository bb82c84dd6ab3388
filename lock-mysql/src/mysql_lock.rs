//! `MysqlLock`: the [`Lock`] backend on a MySQL / MariaDB lease table. The type, its
//! migration, and the `impl Lock` that picks the kind's functions (`kinds/`); construction
//! lives with its configuration (`config.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use lock_core::backend::{Attempt, Capabilities, Handover, Holder, Lock, MultiAttempt};
use lock_core::{Kind, Lease, LockError, Op, Token, check_name, check_ttl};
use sqlx::mysql::MySqlPool;
use tokio::time::Instant;

use crate::error::BACKEND;
use crate::executor::Executor;
use crate::kinds::{self, fair, multi, mutex, note, read_write, semaphore};
use crate::sql::{PING, migration_statements};

/// A distributed lock on MySQL (≥ 8.0) or MariaDB (≥ 10.6): one row per lock name in the lease
/// table [`distlock_leases`](crate::MIGRATION), through a sqlx pool.
///
/// A mutex acquire is one `INSERT … ON DUPLICATE KEY UPDATE` guarded by the row's expiry (one
/// round trip when granted); extend and release are one `UPDATE` each, acting only on the lease's own
/// token. The read-write lock, the semaphore, the fair lock and the multi-lock each run one
/// transaction that locks the name's anchor row first. Expiry is decided by the server's clock
/// alone (`NOW(6)`), in microseconds since the epoch.
///
/// Fencing tokens are `max(server time in µs, last token of the name + 1)`; the last token
/// stays in the row after release and expiry, so they strictly increase per name across
/// release, expiry and a server restart (with InnoDB's durable commits).
///
/// Releases are not announced (MySQL has no LISTEN/NOTIFY): a busy answer carries the holder's
/// time left, and waiters poll with the locker's backoff.
///
/// Every statement (every kind's transaction) is bounded by the statement timeout and
/// connecting by the connect timeout, so a server that is down or hangs yields a typed error
/// in bounded time.
pub struct MysqlLock {
    exec: Executor,
}

impl MysqlLock {
    pub(crate) fn assemble(exec: Executor) -> Self {
        Self { exec }
    }

    /// The pool and limits its statements run within (the inspector's too).
    pub(crate) fn exec(&self) -> &Executor {
        &self.exec
    }

    /// The pool the lock takes its connections from.
    #[must_use]
    pub fn pool(&self) -> &MySqlPool {
        &self.exec.pool
    }

    /// How long one statement may wait for its reply.
    #[must_use]
    pub fn statement_timeout(&self) -> Duration {
        self.exec.statement_timeout
    }

    /// Creates the lock's schema: runs the statements of [`MIGRATION`](crate::MIGRATION) one
    /// after the other (each is idempotent, so concurrent or repeated migrations are safe).
    /// Needs the right to create tables in the connection's database; a user without it runs
    /// the SQL through their own migration tool instead.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the database is unreachable, slow,
    /// or refuses (no `CREATE` right, no database selected in the URL).
    ///
    /// # Cancel safety
    /// Cancel safe: every statement is idempotent; run it again.
    pub async fn migrate(&self) -> Result<(), LockError> {
        let mut conn = self.exec.conn().await?;
        for statement in migration_statements() {
            let slow = Executor {
                // DDL may wait for a metadata lock: ten statement timeouts each.
                statement_timeout: self.exec.statement_timeout * 10,
                ..self.exec.clone()
            };
            slow.run_on(
                &mut conn,
                Op::Connect,
                Box::new(move |c| {
                    async move {
                        sqlx::query(&statement).persistent(false).execute(c).await?;
                        Ok(())
                    }
                    .boxed()
                }),
            )
            .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Lock for MysqlLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// Every kind: the mutex, the read-write lock, the semaphore and the fair lock; the
    /// multi-lock in one transaction; strict fencing tokens per name on the clock's scale;
    /// holder notes. No release announcements.
    fn capabilities(&self) -> Capabilities {
        use lock_core::backend::{Fencing, MultiLock, TokenScale};
        Capabilities::MUTEX
            .with_read_write()
            .with_semaphore()
            .with_fair()
            .with_multi(MultiLock::Atomic)
            .with_fencing(Fencing::Strict(TokenScale::Clock))
            .with_announcements(false)
            .with_holders(true)
            // `lock_mysql::fence`: `CALL distlock_fence(resource, token)`.
            .with_guarded_writes(true)
    }

    /// One `INSERT … ON DUPLICATE KEY UPDATE`, whose OK packet carries a grant's fencing token
    /// (see the crate docs); a busy answer reads the row for the holder's time left.
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

    /// Every kind: the mutex through [`Lock::try_acquire`], the others in one transaction each
    /// on the name's anchor row.
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

    /// Every name in one transaction, all or none, the rows locked in sorted order.
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

    /// The permits of the live holders of `name`: one `SELECT SUM(permits)`.
    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        check_name(name)?;
        semaphore::in_use(&self.exec, name).await
    }

    /// One `UPDATE … WHERE name = ? AND token = ? AND expires_at > now` of the table the
    /// lease's kind lives in.
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        kinds::extend(&self.exec, lease, ttl_ms).await
    }

    /// One `UPDATE` (fencing token, token, expiry) if the lease is still ours; the new fencing
    /// token comes back in its OK packet.
    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        mutex::hand_over(&self.exec, lease, to, ttl_ms).await
    }

    /// The release of the lease's kind: the mutex's `UPDATE`, a reader's or semaphore holder's
    /// `DELETE`, the writer's `UPDATE` (withdrawing its waiting record), the fair lock's
    /// transaction (withdrawing its place in the queue).
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        kinds::release(&self.exec, lease).await
    }

    /// The holder of the mutex `name`, with its note: one `SELECT` joining the notes.
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        check_name(name)?;
        note::describe(&self.exec, name).await
    }

    /// Writes `note` beside the lease's row while its token holds it.
    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        note::annotate(&self.exec, lease, note).await
    }

    /// This lock's operator reads: every kind of the lease tables, and the `GET_LOCK` locks
    /// the server tells of.
    fn inspector(&self) -> Option<&dyn lock_core::backend::Inspect> {
        Some(self)
    }

    /// Gets a connection (connecting if the pool has none) and runs `SELECT 1`.
    async fn ping(&self) -> Result<(), LockError> {
        self.exec
            .run(
                Op::Connect,
                Box::new(|c| {
                    async move {
                        sqlx::query(PING).execute(c).await?;
                        Ok(())
                    }
                    .boxed()
                }),
            )
            .await
    }
}

impl fmt::Debug for MysqlLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlLock")
            .field("connect_timeout", &self.exec.connect_timeout)
            .field("statement_timeout", &self.exec.statement_timeout)
            .finish_non_exhaustive()
    }
}
