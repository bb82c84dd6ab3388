//! Building a [`PostgresLock`].

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use lock_core::LockError;
use tokio_postgres::NoTls;

use crate::postgres_lock::PostgresLock;
use crate::statements::Statements;

/// How long getting a connection may take, connecting and authenticating included, by
/// default: 2 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one statement may wait for its reply by default: 1 s.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(1);

/// How many pooled connections a lock opens at most by default: 4 (the release listener has
/// one more of its own per tokio runtime).
pub const DEFAULT_POOL_SIZE: usize = 4;

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
}

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
    prepared_statements: Option<bool>,
    listen_url: Option<String>,
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

    /// How long one statement may wait for its reply (default [`DEFAULT_OPERATION_TIMEOUT`]).
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

    /// Whether each statement is prepared once per pooled connection (default: yes) or sent
    /// unnamed on every call.
    ///
    /// Prepared statements spare the server parsing and planning each call (about 3 times
    /// the acquire + release cycles per second of unnamed ones in the load tool's P1), but
    /// they live on the server connection. **Behind PgBouncer before 1.21 in transaction
    /// mode, or any pooler without protocol-level prepared statements, turn them off**: such a
    /// pooler runs a statement on whichever server connection is free, where the prepared
    /// statement does not exist, and the operation fails with a non-retryable [`LockError::Backend`] whose source is
    /// [`PreparedStatementsUnsupported`](crate::PreparedStatementsUnsupported). PgBouncer
    /// ≥ 1.21 with `max_prepared_statements` > 0, session mode, or a direct connection keep
    /// them.
    pub fn prepared_statements(mut self, on: bool) -> Self {
        self.prepared_statements = Some(on);
        self
    }

    /// Let the release listener connect to `url` instead of the lock's URL or configuration
    /// (same syntax as [`url`](Self::url)). `LISTEN` is session state: behind a pooler in
    /// transaction mode, point the lock's [`url`](Self::url) at the pooler and this at
    /// PostgreSQL directly (or at a session-mode pool). Ignored with announcements off.
    pub fn listen_url(mut self, url: impl Into<String>) -> Self {
        self.listen_url = Some(url.into());
        self
    }

    /// The lock. Makes no connection yet: the first operation connects.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when neither or both of a URL and a configuration were
    /// given (and no pool), a URL does not parse, a timeout or the pool size is zero.
    pub fn build(self) -> Result<PostgresLock, LockError> {
        let announcements = self.announcements.unwrap_or(true);
        let statements = if self.prepared_statements.unwrap_or(true) {
            Statements::Prepared
        } else {
            Statements::Unnamed
        };
        let listen_url = self.listen_url.clone();
        let settings = self.resolve(DEFAULT_POOL_SIZE)?;
        let node = crate::inspect::node_of(settings.config.as_ref());
        let listen = match listen_url {
            Some(url) => Some(parse(&url, settings.connect_timeout)?),
            None => settings.config,
        };
        Ok(PostgresLock::assemble(
            settings.pool,
            node,
            listen.filter(|_| announcements),
            settings.connect_timeout,
            settings.statement_timeout,
            statements,
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
            self.statement_timeout.unwrap_or(DEFAULT_OPERATION_TIMEOUT),
        )?;
        let pool_size = self.pool_size.unwrap_or(default_pool_size);
        if pool_size == 0 {
            return Err(LockError::invalid("the pool size must not be zero"));
        }
        let config = match (self.url, self.config) {
            (Some(_), Some(_)) => {
                return Err(LockError::invalid(
                    "give a PostgresLock a URL or a configuration, not both",
                ));
            }
            (Some(url), None) => Some(parse(&url, connect_timeout)?),
            (None, Some(config)) => Some(complete(config, connect_timeout)),
            (None, None) => None,
        };
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
            .field("prepared_statements", &self.prepared_statements)
            .finish_non_exhaustive()
    }
}

/// A client configuration from a URL, completed as [`complete`] does.
fn parse(url: &str, connect_timeout: Duration) -> Result<tokio_postgres::Config, LockError> {
    let config = url
        .parse::<tokio_postgres::Config>()
        .map_err(|e| LockError::invalid(format!("bad PostgreSQL URL: {e}")))?;
    Ok(complete(config, connect_timeout))
}

/// `config` with the connect timeout, and `distlock` as its application name unless it has one.
fn complete(
    mut config: tokio_postgres::Config,
    connect_timeout: Duration,
) -> tokio_postgres::Config {
    config.connect_timeout(connect_timeout);
    if config.get_application_name().is_none() {
        config.application_name("distlock");
    }
    config
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
