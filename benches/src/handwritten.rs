//! The hand-written baseline: the minimal Redis lock people write by hand with redis-rs.
//!
//! `SET key token NX PX ttl` to acquire, a compare-and-delete Lua script (EVALSHA) to release,
//! and a fixed 1 ms sleep between attempts while the lock is busy. No fencing, no renewal, no
//! wake-ups, no queue: the floor a lock library has to beat to be worth its code.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};
use tokio::time::Instant;

/// The release script: delete the key only if it still holds our token.
pub const RELEASE_LUA: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1]) else return 0 end";

/// The sleep between attempts of [`HandLock::acquire`] while the lock is busy.
pub const POLL_EVERY: Duration = Duration::from_millis(1);

/// A minimal hand-written Redis lock over one redis-rs multiplexed connection.
#[derive(Clone)]
pub struct HandLock {
    conn: MultiplexedConnection,
    release: Script,
}

impl std::fmt::Debug for HandLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandLock").finish_non_exhaustive()
    }
}

/// The random token of one acquisition: 128 bits from the OS, as 32 hex characters (what a
/// hand-written lock gets from `uuid::Uuid::new_v4()`).
///
/// # Errors
/// If the operating system's random source fails.
pub fn token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{:032x}", u128::from_be_bytes(bytes)))
}

/// One multiplexed connection to the Redis at `url`, with `scripts` loaded: how each
/// hand-written lock starts.
pub(crate) async fn connect_loading(
    url: &str,
    scripts: &[&Script],
) -> RedisResult<MultiplexedConnection> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    for script in scripts {
        script.prepare_invoke().load_async(&mut conn).await?;
    }
    Ok(conn)
}

impl HandLock {
    /// Connects to the Redis at `url` and loads the release script.
    ///
    /// # Errors
    /// If connecting or loading the script fails.
    pub async fn connect(url: &str) -> RedisResult<Self> {
        let release = Script::new(RELEASE_LUA);
        let conn = connect_loading(url, &[&release]).await?;
        Ok(Self { conn, release })
    }

    /// One attempt: `SET key token NX PX ttl`. `Some(token)` if we got it.
    ///
    /// # Errors
    /// Redis errors, and a failing OS random source (as an I/O error).
    pub async fn try_acquire(&self, key: &str, ttl: Duration) -> RedisResult<Option<String>> {
        let token = token().map_err(|e| {
            redis::RedisError::from(std::io::Error::other(format!("no randomness: {e}")))
        })?;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(set.map(|_| token))
    }

    /// Tries every [`POLL_EVERY`] until the lock is ours or `deadline` passes (`None` then).
    ///
    /// # Errors
    /// As [`HandLock::try_acquire`].
    pub async fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        deadline: Instant,
    ) -> RedisResult<Option<String>> {
        loop {
            if let Some(token) = self.try_acquire(key, ttl).await? {
                return Ok(Some(token));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// Compare-and-delete (EVALSHA): `true` if the key still held `token` and is now deleted.
    ///
    /// # Errors
    /// Redis errors.
    pub async fn release(&self, key: &str, token: &str) -> RedisResult<bool> {
        let deleted: i64 = self
            .release
            .key(key)
            .arg(token)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(deleted == 1)
    }
}
