//! The configuration both modes share (URL or pool, timeouts, pool size) and the builders.

use std::str::FromStr;
use std::time::Duration;

use lock_core::LockError;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use crate::advisory::MysqlAdvisoryLock;
use crate::executor::Executor;
use crate::mysql_lock::MysqlLock;

/// How long getting a connection may take by default (connecting included).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one statement (or one kind's transaction) may wait for its reply by default.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(1);

/// The pool size of a [`MysqlLock`] by default.
pub const DEFAULT_POOL_SIZE: u32 = 4;

/// The pool size of a [`MysqlAdvisoryLock`] by default: each held lease keeps a connection.
pub const DEFAULT_ADVISORY_POOL_SIZE: u32 = 16;

/// What both builders collect.
#[derive(Debug, Clone)]
struct Settings {
    url: Option<String>,
    pool: Option<MySqlPool>,
    connect_timeout: Duration,
    statement_timeout: Duration,
    pool_size: u32,
}

impl Settings {
    fn new(pool_size: u32) -> Self {
        Self {
            url: None,
            pool: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            statement_timeout: DEFAULT_OPERATION_TIMEOUT,
            pool_size,
        }
    }

    /// The executor: the given pool, or a lazily connecting one for the URL. Sessions read
    /// committed (fewer gap locks, so fewer deadlocks between kinds' transactions).
    fn executor(self) -> Result<Executor, LockError> {
        if self.connect_timeout.is_zero() || self.statement_timeout.is_zero() {
            return Err(LockError::invalid("timeouts must be greater than zero"));
        }
        if self.pool_size == 0 {
            return Err(LockError::invalid("the pool size must be at least 1"));
        }
        let pool = match (self.pool, self.url) {
            (Some(pool), _) => pool,
            (None, Some(url)) => {
                if !(url.starts_with("mysql://") || url.starts_with("mariadb://")) {
                    return Err(LockError::invalid(format!(
                        "not a MySQL URL (mysql://user:pw@host:port/db): {}",
                        url.split_once("://").map_or("?", |(scheme, _)| scheme)
                    )));
                }
                let options = MySqlConnectOptions::from_str(&url).map_err(|e| {
                    LockError::invalid(format!(
                        "invalid MySQL URL (mysql://user:pw@host:port/db): {e}"
                    ))
                })?;
                MySqlPoolOptions::new()
                    .max_connections(self.pool_size)
                    .acquire_timeout(self.connect_timeout)
                    // A ping before every statement would double its round trips: a dead
                    // connection fails its statement instead (retryable) and is dropped.
                    .test_before_acquire(false)
                    // No maintenance task: building a lock needs no runtime.
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            sqlx::Executor::execute(
                                conn,
                                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                            )
                            .await
                            .map(|_| ())
                        })
                    })
                    .connect_lazy_with(options)
            }
            (None, None) => {
                return Err(LockError::invalid(
                    "no MySQL URL and no pool: call `url(...)` or `pool(...)`",
                ));
            }
        };
        Ok(Executor {
            pool,
            connect_timeout: self.connect_timeout,
            statement_timeout: self.statement_timeout,
        })
    }
}

macro_rules! builder {
    ($(#[$doc:meta])* $builder:ident, $lock:ident, $pool_size:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        #[must_use = "a builder does nothing until `build` is called"]
        pub struct $builder {
            settings: Settings,
        }

        impl Default for $builder {
            fn default() -> Self {
                Self {
                    settings: Settings::new($pool_size),
                }
            }
        }

        impl $builder {
            /// The server: `mysql://user:password@host:port/database` (sqlx's URL syntax,
            /// e.g. `?ssl-mode=required`, `?socket=/path`).
            pub fn url(mut self, url: impl Into<String>) -> Self {
                self.settings.url = Some(url.into());
                self
            }

            /// A pool of your own instead of a URL (its sessions should read committed; the
            /// lock's own pool sets that on connect).
            pub fn pool(mut self, pool: MySqlPool) -> Self {
                self.settings.pool = Some(pool);
                self
            }

            /// How long getting a connection (connecting included) may take; default
            /// [`DEFAULT_CONNECT_TIMEOUT`].
            pub fn connect_timeout(mut self, timeout: Duration) -> Self {
                self.settings.connect_timeout = timeout;
                self
            }

            /// How long one statement (one kind's transaction) may wait for its reply; default
            /// [`DEFAULT_OPERATION_TIMEOUT`].
            pub fn statement_timeout(mut self, timeout: Duration) -> Self {
                self.settings.statement_timeout = timeout;
                self
            }

            /// The most connections the lock's own pool opens (ignored with
            /// [`pool`](Self::pool)).
            pub fn pool_size(mut self, size: u32) -> Self {
                self.settings.pool_size = size;
                self
            }

            /// The lock. No connection is made yet (the first operation connects).
            ///
            /// # Errors
            /// [`LockError::InvalidInput`] for a bad URL, no URL and no pool, a zero timeout
            /// or pool size.
            pub fn build(self) -> Result<$lock, LockError> {
                Ok($lock::assemble(self.settings.executor()?))
            }
        }

        impl $lock {
            /// A builder: URL or pool, timeouts, pool size.
            pub fn builder() -> $builder {
                $builder::default()
            }

            /// A lock on the server at `url` with the default settings.
            ///
            /// # Errors
            /// [`LockError::InvalidInput`] for a bad URL.
            pub fn from_url(url: &str) -> Result<Self, LockError> {
                Self::builder().url(url).build()
            }
        }
    };
}

builder!(
    /// Configures a [`MysqlLock`]; see [`MysqlLock::builder`].
    MysqlLockBuilder,
    MysqlLock,
    DEFAULT_POOL_SIZE
);

builder!(
    /// Configures a [`MysqlAdvisoryLock`]; see [`MysqlAdvisoryLock::builder`].
    MysqlAdvisoryLockBuilder,
    MysqlAdvisoryLock,
    DEFAULT_ADVISORY_POOL_SIZE
);
