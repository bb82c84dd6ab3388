//! The demo's Redis keys and the fenced resource the lock protects.

use distlock::redis::redis::{
    self as redis, AsyncCommands as _, RedisResult, aio::MultiplexedConnection,
};
use distlock::redis::{FencedScript, RedisFences, RedisLock};
use distlock::{Fence, LockError};

/// The lock the workers contend for (also its Redis key: the demo's `RedisLock` has no prefix).
pub(crate) const LOCK_NAME: &str = "demo:ledger";

/// How many holders are inside the critical section: `INCR` on entry, `DECR` on exit.
pub(crate) const INSIDE_KEY: &str = "demo:inside";

/// The counter the holders increment with a non-atomic read-modify-write.
pub(crate) const COUNTER_KEY: &str = "demo:counter";

/// The fenced resource: a hash written only through [`FencedResource::write`], behind
/// lock-redis's fence.
pub(crate) const RESOURCE_KEY: &str = "demo:resource";

/// The fence record of [`RESOURCE_KEY`] (`RedisFences::record_key`): the largest fencing token
/// the resource accepted, kept by the `distlock` function library beside the key.
pub(crate) const RESOURCE_FENCE_KEY: &str = "{demo:resource}:distlock-accepted";

/// Every key the demo writes, cleared at the start of a run: the fence record too, since a
/// run on another backend compares tokens of another scale. (distlock's fencing counter for
/// the lock, `{demo:ledger}:distlock-fence`, is left alone: fencing tokens keep increasing.)
pub(crate) const DEMO_KEYS: [&str; 5] = [
    LOCK_NAME,
    INSIDE_KEY,
    COUNTER_KEY,
    RESOURCE_KEY,
    RESOURCE_FENCE_KEY,
];

/// The resource's state, as read at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The largest fencing token the resource accepted (its fence record).
    pub(crate) fence: Option<u64>,
    /// Who made the last accepted write.
    pub(crate) writer: Option<String>,
    /// How many writes were accepted.
    pub(crate) writes: u64,
}

/// The write behind the fence (`KEYS[1]` the resource, `ARGV[1]` the writer): the library
/// checks the token and raises the record before this runs, in the same script.
const WRITE: &str = "redis.call('HSET', KEYS[1], 'writer', ARGV[1])\n\
                     return redis.call('HINCRBY', KEYS[1], 'writes', 1)";

/// A storage service that checks fencing tokens: it accepts a write only if its token is at
/// least that of every write it accepted before (equal: one holder writes many times), so a
/// holder whose lease ran out while it was stalled cannot overwrite the work of the holder
/// after it. The check is the library's (`RedisFences`, a [`FencedScript`]), not the demo's.
#[derive(Debug)]
pub(crate) struct FencedResource {
    fences: RedisFences,
    script: FencedScript,
}

impl FencedResource {
    /// The resource at [`RESOURCE_KEY`] on the Redis at `url` (the connections of a
    /// `RedisLock` there: with `--backend postgres` or `etcd` the lock lives elsewhere).
    pub(crate) fn new(url: &str) -> Result<Self, LockError> {
        Ok(Self {
            fences: RedisLock::from_url(url)?.fences(),
            script: FencedScript::new(WRITE),
        })
    }

    /// Writes as `writer` with `fencing_token`; `true` if the resource accepted the write,
    /// `false` if it refused it as stale (`LockError::Fenced`).
    pub(crate) async fn write(&self, fencing_token: u64, writer: &str) -> Result<bool, LockError> {
        let fence = Fence::new(RESOURCE_KEY, fencing_token);
        let written = self
            .fences
            .run(&self.script, &fence, &[RESOURCE_KEY], &[writer.as_bytes()])
            .await;
        match written {
            Ok(_) => Ok(true),
            Err(LockError::Fenced { .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// The largest fencing token the resource accepted, if any.
    pub(crate) async fn fence(conn: &mut MultiplexedConnection) -> RedisResult<Option<u64>> {
        conn.get(RESOURCE_FENCE_KEY).await
    }

    /// The resource's whole state.
    pub(crate) async fn snapshot(conn: &mut MultiplexedConnection) -> RedisResult<Snapshot> {
        let (writer, writes): (Option<String>, Option<u64>) = redis::cmd("HMGET")
            .arg(RESOURCE_KEY)
            .arg(&["writer", "writes"])
            .query_async(conn)
            .await?;
        Ok(Snapshot {
            fence: Self::fence(conn).await?,
            writer,
            writes: writes.unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_record_is_the_librarys() {
        assert_eq!(
            RedisFences::record_key(RESOURCE_KEY).expect("a valid key"),
            RESOURCE_FENCE_KEY
        );
    }
}
