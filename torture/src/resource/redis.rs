//! The fenced log of the Redis-family scenarios: a list on the resource's own `redis-server`,
//! appended by a [`FencedScript`] run through lock-redis's [`RedisFences`] (the `distlock`
//! library's fence: the record `{KEY}:distlock-accepted` checked and raised in the script).

use distlock::redis::{FencedScript, RedisFences, RedisLock};
use distlock::{Fence, LockError};
use redis::Connection;

/// The fenced log: every accepted write's `"TOKEN WORKER"`, in the order the fence accepted
/// them. It is also the fenced key (the fence record sits beside it, in its slot).
pub(super) const LOG_KEY: &str = "{torture}:accepted";

/// The user's part of the script, behind the fence: append the entry.
const APPEND: &str = "return redis.call('RPUSH', KEYS[1], ARGV[1])";

/// A worker's fenced log on Redis.
pub(super) struct RedisLog {
    fences: RedisFences,
    script: FencedScript,
}

impl RedisLog {
    /// The fences of a `RedisLock` on the resource's server (`url`): the lock itself takes
    /// nothing there, it only lends its connections.
    pub(super) fn connect(url: &str) -> Result<RedisLog, String> {
        let lock = RedisLock::builder()
            .url(url)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(RedisLog {
            fences: lock.fences(),
            script: FencedScript::new(APPEND),
        })
    }

    /// Appends `entry` behind `fence`, on the record of its resource ([`fenced_key`]); a stale
    /// token is `LockError::Fenced`.
    pub(super) async fn append(&mut self, fence: &Fence, entry: &str) -> Result<(), LockError> {
        self.fences
            .run(&self.script, fence, &[LOG_KEY], &[entry.as_bytes()])
            .await
            .map(drop)
    }
}

/// The fenced key of `lock`: the log's own for the run's one lock, `LOG_KEY:LOCK` for a
/// multi-lock's name (each name's tokens fenced apart, every record in the log's slot).
pub(super) fn fenced_key(lock: Option<&str>) -> String {
    super::resource_of(LOG_KEY, lock)
}

/// The log's entries, read at the end of a run.
pub(super) fn entries(con: &mut Connection) -> Result<Vec<String>, String> {
    redis::cmd("LRANGE")
        .arg(LOG_KEY)
        .arg(0)
        .arg(-1)
        .query(con)
        .map_err(|e| e.to_string())
}
