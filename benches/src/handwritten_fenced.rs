//! The hand-written *fenced* baseline: [`HandLock`](crate::HandLock) with a fencing token, the
//! way a careful user adds one by hand with redis-rs (issue 51).
//!
//! One script takes the key `NX PX` and, when it did, issues a token that keeps growing even
//! after the server restarts empty: the larger of the server's `TIME` in microseconds and the
//! last token + 1, kept in a second key (Kleppmann's fencing tokens, "How to do distributed
//! locking", 2016). The release is the same compare-and-delete script as the unfenced lock's.
//! No renewal, no wake-ups, no queue, no note: what distlock's fenced grant is compared with.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

use crate::handwritten::{RELEASE_LUA, connect_loading, token};

/// The grant: `SET key token NX PX ttl`, then the fencing token, in one atomic script.
///
/// `KEYS[1]` the lock, `KEYS[2]` its counter; `ARGV[1]` the token, `ARGV[2]` the TTL in ms.
/// Returns the fencing token, or 0 when the lock is held. Kept in `benches/lua/` so that
/// `scripts/script-cost.sh` counts the server's side of the same script.
pub const ACQUIRE_FENCED_LUA: &str = include_str!("../lua/hand_acquire_fenced.lua");

/// A hand-written fenced Redis lock over one redis-rs multiplexed connection.
#[derive(Clone)]
pub struct HandFencedLock {
    conn: MultiplexedConnection,
    acquire: Script,
    release: Script,
}

impl std::fmt::Debug for HandFencedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandFencedLock").finish_non_exhaustive()
    }
}

impl HandFencedLock {
    /// Connects to the Redis at `url` and loads both scripts.
    ///
    /// # Errors
    /// If connecting or loading a script fails.
    pub async fn connect(url: &str) -> RedisResult<Self> {
        let acquire = Script::new(ACQUIRE_FENCED_LUA);
        let release = Script::new(RELEASE_LUA);
        let conn = connect_loading(url, &[&acquire, &release]).await?;
        Ok(Self {
            conn,
            acquire,
            release,
        })
    }

    /// One attempt (EVALSHA): `Some((token, fencing token))` if we got the lock `key` for
    /// `ttl` (whole milliseconds, at least 1).
    ///
    /// # Errors
    /// Redis errors, and a failing OS random source (as an I/O error).
    pub async fn try_acquire(
        &self,
        key: &str,
        ttl: Duration,
    ) -> RedisResult<Option<(String, u64)>> {
        let token = token().map_err(|e| {
            redis::RedisError::from(std::io::Error::other(format!("no randomness: {e}")))
        })?;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let fence: u64 = self
            .acquire
            .key(key)
            .key(format!("{key}:fence"))
            .arg(&token)
            .arg(ttl_ms)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok((fence != 0).then_some((token, fence)))
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
