//! `MysqlAdvisoryLock`: the [`Lock`] backend on MySQL's session locks (`GET_LOCK`).

mod name;
mod session;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use lock_core::backend::{Attempt, Capabilities, Lock};
use lock_core::{Lease, LockError, Op, Token, check_name, check_ttl, valid_until};
use sqlx::Row;
use sqlx::mysql::MySqlPool;
use tokio::time::Instant;

pub(crate) use name::HASHED_PREFIX;
pub use name::{MAX_LOCK_NAME_CHARS, advisory_name};

use crate::error::{BACKEND, session_gone};
use crate::executor::Executor;
use session::HeldSession;

/// Take the session lock `?` without waiting: 1 when taken.
const TAKE: &str = "SELECT GET_LOCK(?, 0)";
/// Set how long the session may idle before the server closes it (and releases its lock).
const IDLE_LIMIT: &str = "SET SESSION wait_timeout = ?";
/// Give a session going back to the pool the server's default idle limit again.
const IDLE_DEFAULT: &str = "SET SESSION wait_timeout = @@GLOBAL.wait_timeout";
/// Whether the session still holds the lock `?` (the heartbeat).
const HOLDS: &str = "SELECT IS_USED_LOCK(?) = CONNECTION_ID()";
/// Release the session lock `?`: 1 when it was this session's.
const RELEASE: &str = "SELECT RELEASE_LOCK(?)";

/// A distributed lock on MySQL / MariaDB session locks: `GET_LOCK(name, 0)` on a pooled
/// connection that is kept for as long as the lease is held. No table and no migration.
///
/// - **The lease is the session.** The server releases the lock when the session ends: the
///   client closed it, the process died, `KILL CONNECTION`, or the session idled past its
///   `wait_timeout`, which a grant sets to the TTL plus the statement timeout (whole seconds),
///   so a holder that stops renewing loses the lock a little after its lease ran out, and a
///   server `wait_timeout` shorter than the TTL cannot end a renewed session. Extend is a
///   heartbeat on the held connection that checks the session still holds the lock
///   (`IS_USED_LOCK(name) = CONNECTION_ID()`); a session that is gone answers "not ours", so
///   the guard's `lost()` fires, never a silent success.
/// - **Names** over 64 characters are hashed ([`advisory_name`]).
/// - **Release** is `RELEASE_LOCK` on the held connection; its answer is checked, and the
///   connection goes back to the pool only when it was 1.
/// - **No fencing** (every lease's token is 0: a session lock has no counter; use
///   [`MysqlLock`](crate::MysqlLock) where a resource checks fencing tokens), **no
///   announcements** (waiters poll), the mutex only.
///
/// Each held lease keeps one pooled connection: the pool size bounds held leases plus attempts
/// in flight. Not behind Vitess (which refuses `GET_LOCK`) or a multiplexing ProxySQL (see the
/// crate docs).
pub struct MysqlAdvisoryLock {
    exec: Executor,
    /// The held leases: (name, token) to the connection whose session holds the lock.
    held: Mutex<HashMap<(String, Token), Arc<HeldSession>>>,
}

impl MysqlAdvisoryLock {
    pub(crate) fn assemble(exec: Executor) -> Self {
        Self {
            exec,
            held: Mutex::new(HashMap::new()),
        }
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

    /// The names this lock holds now, by their `GET_LOCK` names: what a listing shows in
    /// place of a long name's hash (the server knows only the hash).
    pub(crate) fn held_names(&self) -> HashMap<String, String> {
        self.map()
            .iter()
            .map(|((name, _), held)| (held.key.clone(), name.clone()))
            .collect()
    }

    /// How many leases this lock holds now (each keeps one connection).
    #[must_use]
    pub fn held_leases(&self) -> usize {
        self.map().len()
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

    /// Runs one statement on `held`'s connection with `arg` bound, answering its row (none for
    /// a `SET`); an error says whether the session is gone.
    async fn on_held(
        &self,
        held: &HeldSession,
        op: Op,
        sql: &'static str,
        arg: Arg,
    ) -> Result<Option<sqlx::mysql::MySqlRow>, (LockError, bool)> {
        let key = held.key.clone();
        let mut guard = held.conn.lock().await;
        let Some(conn) = guard.as_mut() else {
            return Err((crate::error::unexpected(op, "the session was closed"), true));
        };
        let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::clone(&gone);
        self.exec
            .run_on(
                conn,
                op,
                Box::new(move |c| {
                    async move {
                        let query = sqlx::query(sql);
                        let query = match arg {
                            Arg::Key => query.bind(&key),
                            Arg::Seconds(seconds) => query.bind(seconds),
                            Arg::Nothing => query,
                        };
                        let row = query.fetch_optional(c).await;
                        if let Err(err) = &row {
                            seen.store(session_gone(err), std::sync::atomic::Ordering::Relaxed);
                        }
                        row
                    }
                    .boxed()
                }),
            )
            .await
            .map_err(|error| (error, gone.load(std::sync::atomic::Ordering::Relaxed)))
    }
}

#[async_trait]
impl Lock for MysqlAdvisoryLock {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// The mutex only, the multi-lock one name after the other. No fencing tokens (every grant
    /// carries 0) and no release announcements (waiters poll).
    fn capabilities(&self) -> Capabilities {
        use lock_core::backend::{Fencing, MultiLock};
        Capabilities::MUTEX
            .with_multi(MultiLock::InOrder)
            .with_fencing(Fencing::None)
            .with_announcements(false)
            // The lock ends with its session: a crashed holder's lock is free at once, so a
            // lock-delay could not hold.
            .with_lock_delay(false)
    }

    /// `GET_LOCK(advisory_name(name), 0)` on a pooled connection, kept for the lease when it
    /// answers 1. Busy answers carry no holder TTL and never announce.
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
        let idle = idle_limit(ttl_ms, self.exec.statement_timeout)?;
        let held = HeldSession::new(self.exec.conn().await?, advisory_name(name));
        let started = Instant::now();
        let got = first_int(
            self.on_held(&held, Op::Acquire, TAKE, Arg::Key).await,
            Op::Acquire,
        )?;
        if got != Some(1) {
            held.mark_clean(); // nothing taken: back to the pool
            return Ok(Attempt::Busy {
                holder_ttl: None,
                announces: false,
            });
        }
        // The session idles at most the TTL (plus the statement timeout) before the server
        // closes it, and its lock with it: a holder that stops renewing loses the lock a
        // little after its lease ran out, whatever the server's own `wait_timeout`.
        self.on_held(&held, Op::Acquire, IDLE_LIMIT, Arg::Seconds(idle))
            .await
            .map_err(|(error, _)| error)?;
        held.set_idle(idle);
        self.map().insert((name.to_owned(), token), Arc::new(held));
        let valid = valid_until(started, Duration::from_millis(ttl_ms));
        Ok(Attempt::Acquired(Lease::new(name, token, 0, valid)))
    }

    /// A heartbeat on the held connection: `IS_USED_LOCK(name) = CONNECTION_ID()`. `None` when
    /// the session is gone (killed, closed at its `wait_timeout`, the server restarted: the
    /// lock went with it), no longer holds the lock, or the lease is unknown to this lock.
    ///
    /// # Errors
    /// [`LockError::Timeout`] when the heartbeat gets no reply within the statement timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: the lease stays held.
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let Some(held) = self.lookup(lease) else {
            return Ok(None);
        };
        let idle = idle_limit(ttl_ms, self.exec.statement_timeout)?;
        let started = Instant::now();
        if held.idle() != idle {
            match self
                .on_held(&held, Op::Extend, IDLE_LIMIT, Arg::Seconds(idle))
                .await
            {
                Ok(_) => held.set_idle(idle),
                Err((_, true)) => {
                    self.forget(lease);
                    return Ok(None);
                }
                Err((error, false)) => return Err(error),
            }
        }
        match self.on_held(&held, Op::Extend, HOLDS, Arg::Key).await {
            Ok(row) => {
                if first_int(Ok(row), Op::Extend)? == Some(1) {
                    Ok(Some(valid_until(started, Duration::from_millis(ttl_ms))))
                } else {
                    self.forget(lease);
                    Ok(None)
                }
            }
            Err((_, true)) => {
                self.forget(lease);
                Ok(None)
            }
            Err((error, false)) => Err(error),
        }
    }

    /// `RELEASE_LOCK` on the held connection, its answer checked; the connection goes back to
    /// the pool only when it was 1, and is closed otherwise. `false` when the session is gone
    /// or the lease is unknown.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the connection is closed and the lock released with its session.
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let Some(held) = self.forget(lease) else {
            return Ok(false);
        };
        match self.on_held(&held, Op::Release, RELEASE, Arg::Key).await {
            Ok(row) => {
                let released = first_int(Ok(row), Op::Release)? == Some(1);
                if released
                    && self
                        .on_held(&held, Op::Release, IDLE_DEFAULT, Arg::Nothing)
                        .await
                        .is_ok()
                {
                    held.mark_clean(); // holds nothing, idle limit restored: back to the pool
                }
                Ok(released)
            }
            Err((_, true)) => Ok(false),
            Err((error, false)) => Err(error),
        }
    }

    /// The server's operator reads: the `GET_LOCK` locks it tells of, and the lease tables'
    /// holders where the schema was migrated.
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
                        sqlx::query(crate::sql::PING).execute(c).await?;
                        Ok(())
                    }
                    .boxed()
                }),
            )
            .await
    }
}

/// What a statement on a held session binds.
#[derive(Clone, Copy)]
enum Arg {
    /// The `GET_LOCK` name.
    Key,
    /// A number of seconds.
    Seconds(u64),
    /// Nothing.
    Nothing,
}

/// The first column of a statement's row, as an integer (null as `None`).
fn first_int(
    row: Result<Option<sqlx::mysql::MySqlRow>, (LockError, bool)>,
    op: Op,
) -> Result<Option<i64>, LockError> {
    let row = row.map_err(|(error, _)| error)?;
    let row = row.ok_or_else(|| crate::error::unexpected(op, "no row"))?;
    row.try_get(0).map_err(|e| crate::error::unexpected(op, e))
}

/// The longest `wait_timeout` MySQL takes, in seconds (a year).
const MAX_IDLE_S: u64 = 31_536_000;

/// The session's idle limit for a lease of `ttl_ms`: the TTL plus the statement timeout,
/// rounded up to whole seconds.
fn idle_limit(ttl_ms: u64, statement: Duration) -> Result<u64, LockError> {
    let ms = u128::from(ttl_ms) + statement.as_millis();
    let seconds = u64::try_from(ms.div_ceil(1000)).unwrap_or(u64::MAX);
    if seconds > MAX_IDLE_S {
        return Err(LockError::invalid(format!(
            "a TTL of {ttl_ms} ms is too long for the advisory mode: the session's wait_timeout \
             (TTL + statement timeout) must stay within {MAX_IDLE_S} s (a year)"
        )));
    }
    Ok(seconds)
}

impl fmt::Debug for MysqlAdvisoryLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlAdvisoryLock")
            .field("connect_timeout", &self.exec.connect_timeout)
            .field("statement_timeout", &self.exec.statement_timeout)
            .field("held_leases", &self.held_leases())
            .finish_non_exhaustive()
    }
}
