//! The operator reads (lock-core's [`Inspect`]: what `distlock ls`, `show`, `release --token`
//! and `watch` need), beside the layout they read, for both lock types:
//!
//! - [`PostgresLock`] shows the database as an operator sees it: every kind of the lease table
//!   (`table.rs`, `rows.rs`) and the database's advisory locks (`advisory.rs`, `lock_key.rs`:
//!   sqlx's, the advisory mode's, anyone's), a name being able to be held both ways; releases
//!   by token through the kinds' own releases (`release.rs`); and counts the announced releases
//!   (`feed.rs`).
//! - [`PostgresAdvisoryLock`] shows the database's advisory locks only: it needs no table, and
//!   is used where there may be none (or no right to read it). The server keeps only a lock's
//!   key, so a listing names another process's lock `advisory:<key>`; the lock's own sessions
//!   are named by their lease's name, and their holders carry its token after the backend pid
//!   (`<pid>:<token>`), so a process finds its own leases among the sessions.
//!
//! An advisory lock is [`HeldKind::Session`](lock_core::backend::HeldKind::Session): no token
//! to compare, so never released by one ([`PostgresLock::advisory_holders`] and
//! [`PostgresLock::end_advisory_session`] are what `release --force` uses instead).

mod advisory;
mod feed;
mod lock_key;
mod release;
mod rows;
mod table;

use std::collections::HashMap;
use std::time::SystemTime;

use async_trait::async_trait;
use lock_core::LockError;
use lock_core::backend::{HeldLock, Inspect, ListOptions, Listing, Lock, NamePattern, ReleaseFeed};

use crate::executor::Executor;
use crate::statements::Statements;
use crate::{PostgresAdvisoryLock, PostgresLock};

/// A server session holding an advisory lock, as `pg_stat_activity` tells it: what an operator
/// needs to decide to end it ([`PostgresLock::end_advisory_session`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdvisorySession {
    /// The session's server process (`pg_backend_pid()`), the holder token of its
    /// [`HeldKind::Session`](lock_core::backend::HeldKind::Session) lock.
    pub pid: i32,
    /// Its `application_name`, when set.
    pub application_name: Option<String>,
    /// The client's address, when it connected over TCP.
    pub client_addr: Option<String>,
    /// The role it logged in as.
    pub user: Option<String>,
    /// When the session started (server clock): the lock is held at most since then.
    pub session_since: Option<SystemTime>,
    /// Whether it holds the lock shared (`pg_advisory_lock_shared`).
    pub shared: bool,
}

/// `host:port` of a client configuration's first host (a socket's directory for a Unix
/// socket): a held lock's `node`. `postgres` for a lock made from a pool alone.
pub(crate) fn node_of(config: Option<&tokio_postgres::Config>) -> String {
    let Some(config) = config else {
        return crate::error::BACKEND.to_owned();
    };
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        Some(tokio_postgres::config::Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// A pattern without wildcards: a name, whose advisory key a listing can name.
fn literal(pattern: &NamePattern) -> Option<&str> {
    let text = pattern.as_str();
    (pattern.literal_prefix().len() == text.len()).then_some(text)
}

/// Every hold of `name` in the lease table and among the advisory locks, by kind.
async fn read_all(
    exec: &Executor,
    node: &str,
    name: &str,
    own: &advisory::Own,
) -> Result<Vec<HeldLock>, LockError> {
    let filter = table::Filter::Name(name.to_owned());
    let ((mut locks, _), sessions) = futures::try_join!(
        rows::read(exec, &filter, node),
        advisory::describe(exec, node, name, own)
    )?;
    locks.extend(sessions);
    locks.sort_by_key(|l| l.kind.as_str());
    Ok(locks)
}

impl PostgresLock {
    /// The sessions that hold `name`'s advisory lock (its key as [`advisory_key`] maps it, or
    /// `advisory:<key>` / `advisory:<k1>,<k2>` as a listing names a key): empty when none does,
    /// several for a shared lock. What `distlock release --force` asks before ending one.
    ///
    /// [`advisory_key`]: crate::advisory_key
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for an empty or over-long name; [`LockError::Timeout`] /
    /// [`LockError::Backend`] when the database fails or is slow.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn advisory_holders(&self, name: &str) -> Result<Vec<AdvisorySession>, LockError> {
        lock_core::check_name(name)?;
        advisory::holders(self.executor(), name).await
    }

    /// Ends the session `pid` if it still holds `name`'s advisory lock
    /// (`pg_terminate_backend`, the same pid on the same key in one statement, so a pid reused
    /// since is never hit), then waits, polling every 50 ms within the statement timeout, for
    /// the server to free the lock: whether it is free. Every lock the session holds is freed,
    /// and its open transaction rolled back.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for an empty or over-long name; [`LockError::Backend`] when
    /// the server refuses (ending another role's session needs superuser or
    /// `pg_signal_backend`) or did not end the session (it had ended, or no longer holds the
    /// lock); [`LockError::Timeout`] when it is slow.
    ///
    /// # Cancel safety
    /// Cancel safe: the session is ended or not; only the wait is cut short.
    pub async fn end_advisory_session(&self, name: &str, pid: i32) -> Result<bool, LockError> {
        lock_core::check_name(name)?;
        advisory::terminate(self.executor(), name, pid).await
    }
}

#[async_trait]
impl Inspect for PostgresLock {
    /// The lease table's held locks whose names match (read `LIKE` the pattern's literal
    /// prefix, one query per kind), and the database's advisory locks (named
    /// `advisory:<key>`, or by the pattern itself when it has no wildcard and is that key's
    /// name). `scanned` counts the rows read. A database migrated to an older schema shows the
    /// kinds it has, without a grant's date before version 5.
    ///
    /// An advisory lock ([`HeldKind::Session`](lock_core::backend::HeldKind::Session)) has one
    /// holder per session holding it (several for a shared lock), its token the backend pid,
    /// and as its note a JSON object describing the session from `pg_stat_activity`:
    /// `backend_pid`, `application_name`, `client_addr`, `user`, `session_since_ms` (Unix ms:
    /// the lock is held at most since then; PostgreSQL does not record when it was taken),
    /// `state`, `state_change_ms`, and `mode` (`ExclusiveLock` or `ShareLock`), each where known.
    /// Its `waiters` are the sessions waiting for it.
    async fn list(
        &self,
        pattern: &NamePattern,
        _options: &ListOptions,
    ) -> Result<Listing, LockError> {
        let exec = self.executor();
        let literal = literal(pattern);
        let filter = match literal {
            Some(name) => table::Filter::Name(name.to_owned()),
            None => table::Filter::Like(table::like_prefix(pattern.as_str())),
        };
        let node = self.node();
        let own = HashMap::new();
        let ((mut locks, rows), (sessions, session_rows)) = futures::try_join!(
            rows::read(exec, &filter, node),
            advisory::list(exec, node, literal, &own)
        )?;
        locks.extend(sessions);
        locks.retain(|lock| pattern.matches(&lock.name));
        Ok(Listing::new(locks, rows + session_rows))
    }

    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        read_all(self.executor(), self.node(), name, &HashMap::new()).await
    }

    /// The lease `token` holds, released by its kind's own release (announced, a fair queue's
    /// head told). An advisory lock is never released by a token: `Ok(false)`.
    ///
    /// # Errors
    /// As [`Inspect::release_held`]; [`LockError::InvalidInput`] when `name` is held with
    /// `token` but it is not a distlock token (another client's row).
    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        match release::lease_of(self.executor(), name, token).await? {
            Some(lease) => self.release(&lease).await,
            None => Ok(false),
        }
    }

    /// A connection of its own listening on the release channels (to the listener's URL);
    /// `None` with announcements off.
    async fn release_feed(&self) -> Result<Option<Box<dyn ReleaseFeed>>, LockError> {
        let Some(config) = self.listen_config() else {
            return Ok(None);
        };
        let feed = feed::PostgresReleaseFeed::start(
            config,
            self.connect_timeout(),
            self.statement_timeout(),
        )
        .await?;
        Ok(Some(Box::new(feed)))
    }
}

impl PostgresAdvisoryLock {
    /// The statements of the reads: unnamed (any pool will do; the reads are rare).
    fn executor(&self) -> Executor {
        Executor {
            pool: self.pool().clone(),
            connect_timeout: self.connect_timeout,
            statement_timeout: self.statement_timeout,
            statements: Statements::Unnamed,
        }
    }

    /// This lock's held leases (name, token), by the backend pid of the session holding each.
    fn own_sessions(&self) -> advisory::Own {
        self.held_sessions()
            .into_iter()
            .map(|(pid, name, token)| (pid, (name, token.to_hex().as_str().to_owned())))
            .collect()
    }

    /// The sessions that hold `name`'s advisory lock: as
    /// [`PostgresLock::advisory_holders`].
    ///
    /// # Errors
    /// As [`PostgresLock::advisory_holders`].
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn advisory_holders(&self, name: &str) -> Result<Vec<AdvisorySession>, LockError> {
        lock_core::check_name(name)?;
        advisory::holders(&self.executor(), name).await
    }

    /// Ends the session `pid` if it still holds `name`'s advisory lock: as
    /// [`PostgresLock::end_advisory_session`].
    ///
    /// # Errors
    /// As [`PostgresLock::end_advisory_session`].
    ///
    /// # Cancel safety
    /// Cancel safe: the session is ended or not; only the wait is cut short.
    pub async fn end_advisory_session(&self, name: &str, pid: i32) -> Result<bool, LockError> {
        lock_core::check_name(name)?;
        advisory::terminate(&self.executor(), name, pid).await
    }
}

#[async_trait]
impl Inspect for PostgresAdvisoryLock {
    /// The database's advisory locks that match: this lock's own leases by their names, the
    /// others named `advisory:<key>` (or by the pattern itself when it has no wildcard and is
    /// that key's name). `scanned` counts the `pg_locks` rows read.
    async fn list(
        &self,
        pattern: &NamePattern,
        _options: &ListOptions,
    ) -> Result<Listing, LockError> {
        let own = self.own_sessions();
        let (mut locks, rows) =
            advisory::list(&self.executor(), self.node(), literal(pattern), &own).await?;
        locks.retain(|lock| pattern.matches(&lock.name));
        Ok(Listing::new(locks, rows))
    }

    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        let own = self.own_sessions();
        advisory::describe(&self.executor(), self.node(), name, &own).await
    }

    /// Never: a session's lock has no token to compare, and only its session unlocks it (or
    /// its end: [`PostgresAdvisoryLock::end_advisory_session`]). `Ok(false)`.
    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError> {
        let _ = (name, token);
        Ok(false)
    }
}
