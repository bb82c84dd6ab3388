//! Configuring a `PostgresAdvisoryLock`.

use std::time::Duration;

use deadpool_postgres::Pool;
use lock_core::LockError;

use super::PostgresAdvisoryLock;
use crate::config::PostgresLockBuilder;

/// How many pooled connections a [`PostgresAdvisoryLock`] opens at most by default: 16. Each
/// held lease keeps one for as long as it is held.
pub const DEFAULT_ADVISORY_POOL_SIZE: usize = 16;

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
}

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
    /// PostgreSQL directly or through a session-mode pool (see
    /// [`TransactionPooler`](crate::TransactionPooler)).
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
    /// [`DEFAULT_OPERATION_TIMEOUT`](crate::DEFAULT_OPERATION_TIMEOUT)), enforced by the
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
        Ok(PostgresAdvisoryLock::assemble(
            settings.pool,
            crate::inspect::node_of(settings.config.as_ref()),
            settings.connect_timeout,
            settings.statement_timeout,
        ))
    }
}
