//! Building a [`RedisLock`].

use std::time::Duration;

use deadpool_redis::{Manager, Pool, Runtime};
use lock_core::LockError;

use crate::RedisLock;

/// How long getting a connection may take, connecting included, by default: 2 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one command may wait for its reply by default: 1 s.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a name's fencing counter is kept after its last grant by default: 24 h.
pub const DEFAULT_FENCE_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Configures a [`RedisLock`]: where Redis is (a URL or your own `deadpool_redis::Pool`), the key
/// prefix, timeouts and the fencing counter's retention.
///
/// ```
/// use std::time::Duration;
/// use lock_redis::RedisLock;
///
/// let lock = RedisLock::builder()
///     .url("redis://127.0.0.1:6379/0")
///     .prefix("myapp:locks:")
///     .command_timeout(Duration::from_millis(500))
///     .build()?;
/// # Ok::<(), lock_redis::LockError>(())
/// ```
#[derive(Debug, Default)]
#[must_use]
pub struct RedisLockBuilder {
    url: Option<String>,
    pool: Option<Pool>,
    pubsub_url: Option<String>,
    announcements: Option<bool>,
    prefix: String,
    connect_timeout: Option<Duration>,
    command_timeout: Option<Duration>,
    fence_retention: Option<Duration>,
}

impl RedisLockBuilder {
    /// Connect with a `redis://` (or `unix://`) URL; credentials and database go in the URL
    /// (`redis://user:password@host:port/db`). A pool of up to 4 connections is made, of which
    /// the lock keeps one in use (see the crate docs).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Use an existing pool instead of a URL. Release announcements then need
    /// [`pubsub_url`](RedisLockBuilder::pubsub_url).
    pub fn pool(mut self, pool: Pool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Where the pub/sub connection for release announcements connects (default: the
    /// [`url`](RedisLockBuilder::url)); needed with a [`pool`](RedisLockBuilder::pool).
    pub fn pubsub_url(mut self, url: impl Into<String>) -> Self {
        self.pubsub_url = Some(url.into());
        self
    }

    /// Whether waiters subscribe to release announcements (default: yes, when a URL is known).
    /// Without them waiters poll with backoff: more commands and a slower handoff, but one
    /// connection fewer.
    pub fn announcements(mut self, on: bool) -> Self {
        self.announcements = Some(on);
        self
    }

    /// Put every key under `prefix`: the lock named `n` lives at `prefix + n` (default: no
    /// prefix, so `n` itself, as redis-py and node-redlock name it).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long getting a connection may take, connecting and authenticating included (default
    /// [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// How long one command may wait for its reply (default [`DEFAULT_COMMAND_TIMEOUT`]).
    /// Past it the operation fails with a `Command` timeout and the connection is replaced.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = Some(timeout);
        self
    }

    /// How long a name's fencing counter is kept after its last grant (default
    /// [`DEFAULT_FENCE_RETENTION`]). While it is kept, fencing tokens increase even if the
    /// server's clock steps back; after, they rest on the clock alone. Each kept counter costs
    /// one small key.
    pub fn fence_retention(mut self, retention: Duration) -> Self {
        self.fence_retention = Some(retention);
        self
    }

    /// The lock. Makes no connection yet: the first operation connects.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when neither or both of a URL and a pool were given, the URL
    /// does not parse, or a timeout or the retention is zero or out of range.
    pub fn build(self) -> Result<RedisLock, LockError> {
        let connect_timeout = positive(
            "connect timeout",
            self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
        )?;
        let command_timeout = positive(
            "command timeout",
            self.command_timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT),
        )?;
        let pubsub_url = self.pubsub_url.clone().or_else(|| self.url.clone());
        let pool = match (self.url, self.pool) {
            (Some(url), None) => pool_from_url(&url, connect_timeout, command_timeout)?,
            (None, Some(pool)) => pool,
            (None, None) => return Err(LockError::invalid("a RedisLock needs a URL or a pool")),
            (Some(_), Some(_)) => {
                return Err(LockError::invalid(
                    "give a RedisLock a URL or a pool, not both",
                ));
            }
        };
        let fence_retention = self.fence_retention.unwrap_or(DEFAULT_FENCE_RETENTION);
        lock_core::check_ttl(fence_retention).map_err(|_| {
            LockError::invalid(format!(
                "the fence retention {fence_retention:?} is out of range"
            ))
        })?;
        let pubsub = match (self.announcements.unwrap_or(true), pubsub_url) {
            (true, Some(url)) => Some(
                redis::Client::open(url)
                    .map_err(|e| LockError::invalid(format!("bad pub/sub URL: {e}")))?,
            ),
            _ => None,
        };
        Ok(RedisLock::assemble(
            pool,
            Settings {
                prefix: self.prefix,
                connect_timeout,
                command_timeout,
                fence_retention,
                pubsub,
            },
        ))
    }
}

/// What a `RedisLock` is assembled from, past its pool.
pub(crate) struct Settings {
    pub(crate) prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) fence_retention: Duration,
    /// The client of the release subscriber, if announcements are on.
    pub(crate) pubsub: Option<redis::Client>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            prefix: String::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            fence_retention: DEFAULT_FENCE_RETENTION,
            pubsub: None,
        }
    }
}

fn positive(what: &str, d: Duration) -> Result<Duration, LockError> {
    if d.is_zero() {
        Err(LockError::invalid(format!("the {what} must not be zero")))
    } else {
        Ok(d)
    }
}

fn pool_from_url(
    url: &str,
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<Pool, LockError> {
    // redis-rs has timeouts of its own (1 s to connect, 500 ms per reply); make them ours, so the
    // configured values are the ones in force.
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(Some(command_timeout));
    let manager = Manager::new_with_config(url, config)
        .map_err(|e| LockError::invalid(format!("bad Redis URL: {e}")))?;
    Pool::builder(manager)
        .max_size(4)
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| LockError::invalid(format!("cannot make a pool: {e}")))
}
