//! Building a [`PostgresLock`].

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use lock_core::LockError;
use tokio_postgres::NoTls;

use crate::PostgresLock;

/// How long getting a connection may take, connecting and authenticating included, by
/// default: 2 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one statement may wait for its reply by default: 1 s.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(1);

/// How many pooled connections a lock opens at most by default: 4 (the release listener has
/// one more of its own per tokio runtime).
pub const DEFAULT_POOL_SIZE: usize = 4;

/// Configures a [`PostgresLock`]; from [`PostgresLock::builder`].
///
/// ```
/// use std::time::Duration;
/// use lock_postgres::PostgresLock;
///
/// let lock = PostgresLock::builder()
///     .url("postgres://locker:secret@db.internal:5432/app")
///     .connect_timeout(Duration::from_secs(1))
///     .statement_timeout(Duration::from_millis(500))
///     .build()?;
/// # drop(lock);
/// # Ok::<(), lock_postgres::LockError>(())
/// ```
#[derive(Default)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PostgresLockBuilder {
    url: Option<String>,
    config: Option<tokio_postgres::Config>,
    pool: Option<Pool>,
    connect_timeout: Option<Duration>,
    statement_timeout: Option<Duration>,
    pool_size: Option<usize>,
    announcements: Option<bool>,
}

impl PostgresLockBuilder {
    /// Lock on the database at `url`: a `postgres://user:password@host:port/dbname` URL or a
    /// `host=… user=… password=… dbname=…` string, as `tokio_postgres::Config` parses them.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Lock on the database this client configuration names.
    pub fn config(mut self, config: tokio_postgres::Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Lock through this pool of yours (plain TCP or TLS, as you built it). The release
    /// listener needs a configuration to open its own connection: give it a
    /// [`url`](Self::url) or [`config`](Self::config) too, or waiters poll with backoff.
    pub fn pool(mut self, pool: Pool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// How long getting a connection may take, connecting and authenticating included (default
    /// [`DEFAULT_CONNECT_TIMEOUT`]). Past it an operation fails with a `Connect` timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// How long one statement may wait for its reply (default [`DEFAULT_STATEMENT_TIMEOUT`]).
    /// Past it the operation fails with a `Command` timeout, the connection is dropped and a
    /// cancel request is sent for the statement. It is enforced by the client, not with the
    /// server's `statement_timeout` setting, so no session state is needed (PgBouncer).
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = Some(timeout);
        self
    }

    /// How many pooled connections the lock opens at most (default [`DEFAULT_POOL_SIZE`]);
    /// ignored with a [`pool`](Self::pool) of yours.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = Some(size);
        self
    }

    /// Whether waiters listen for release announcements (default: yes, when a URL or
    /// configuration is known). Without them waiters poll with backoff: more statements and a
    /// slower handoff, but one connection fewer per runtime. Releases are announced either way.
    pub fn announcements(mut self, on: bool) -> Self {
        self.announcements = Some(on);
        self
    }

    /// The lock. Makes no connection yet: the first operation connects.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when neither or both of a URL and a configuration were
    /// given (and no pool), the URL does not parse, a timeout or the pool size is zero.
    pub fn build(self) -> Result<PostgresLock, LockError> {
        let announcements = self.announcements.unwrap_or(true);
        let settings = self.resolve(DEFAULT_POOL_SIZE)?;
        let listen = settings.config.filter(|_| announcements);
        Ok(PostgresLock::assemble(
            settings.pool,
            listen,
            settings.connect_timeout,
            settings.statement_timeout,
        ))
    }

    /// Checks the settings and makes the pool (of `default_pool_size` connections unless a
    /// size or a pool was given): what both modes need.
    pub(crate) fn resolve(self, default_pool_size: usize) -> Result<Resolved, LockError> {
        let connect_timeout = positive(
            "connect timeout",
            self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
        )?;
        let statement_timeout = positive(
            "statement timeout",
            self.statement_timeout.unwrap_or(DEFAULT_STATEMENT_TIMEOUT),
        )?;
        let pool_size = self.pool_size.unwrap_or(default_pool_size);
        if pool_size == 0 {
            return Err(LockError::invalid("the pool size must not be zero"));
        }
        let mut config = match (self.url, self.config) {
            (Some(_), Some(_)) => {
                return Err(LockError::invalid(
                    "give a PostgresLock a URL or a configuration, not both",
                ));
            }
            (Some(url), None) => Some(
                url.parse::<tokio_postgres::Config>()
                    .map_err(|e| LockError::invalid(format!("bad PostgreSQL URL: {e}")))?,
            ),
            (None, config) => config,
        };
        if let Some(config) = &mut config {
            config.connect_timeout(connect_timeout);
            if config.get_application_name().is_none() {
                config.application_name("distlock");
            }
        }
        let pool = match (self.pool, &config) {
            (Some(pool), _) => pool,
            (None, Some(config)) => pool_from(config.clone(), pool_size)?,
            (None, None) => {
                return Err(LockError::invalid(
                    "a PostgresLock needs a URL, a configuration or a pool",
                ));
            }
        };
        Ok(Resolved {
            pool,
            config,
            connect_timeout,
            statement_timeout,
        })
    }
}

/// The checked settings of a builder.
pub(crate) struct Resolved {
    pub(crate) pool: Pool,
    pub(crate) config: Option<tokio_postgres::Config>,
    pub(crate) connect_timeout: Duration,
    pub(crate) statement_timeout: Duration,
}

impl std::fmt::Debug for PostgresLockBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL and configuration may hold a password: not printed.
        f.debug_struct("PostgresLockBuilder")
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("pool_size", &self.pool_size)
            .field("announcements", &self.announcements)
            .finish_non_exhaustive()
    }
}

fn positive(what: &str, d: Duration) -> Result<Duration, LockError> {
    if d.is_zero() {
        Err(LockError::invalid(format!("the {what} must not be zero")))
    } else {
        Ok(d)
    }
}

fn pool_from(config: tokio_postgres::Config, size: usize) -> Result<Pool, LockError> {
    // `Fast` recycling checks only that the connection is open: no extra round trip per
    // operation. A broken connection shows on its next statement and is then dropped.
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| LockError::invalid(format!("cannot make a pool: {e}")))
}
