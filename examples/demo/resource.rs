//! The demo's Redis keys and the fenced resource the lock protects.

use distlock::redis::redis::{
    self as redis, AsyncCommands as _, RedisResult, Script, aio::MultiplexedConnection,
};

/// The lock the workers contend for (also its Redis key: the demo's `RedisLock` has no prefix).
pub(crate) const LOCK_NAME: &str = "demo:ledger";

/// How many holders are inside the critical section: `INCR` on entry, `DECR` on exit.
pub(crate) const INSIDE_KEY: &str = "demo:inside";

/// The counter the holders increment with a non-atomic read-modify-write.
pub(crate) const COUNTER_KEY: &str = "demo:counter";

/// The fenced resource: a hash written only through `fenced_write.lua`.
pub(crate) const RESOURCE_KEY: &str = "demo:resource";

/// Every key the demo writes, cleared at the start of a run. (distlock's fencing counter for
/// the lock, `{demo:ledger}:distlock-fence`, is left alone: fencing tokens keep increasing.)
pub(crate) const DEMO_KEYS: [&str; 4] = [LOCK_NAME, INSIDE_KEY, COUNTER_KEY, RESOURCE_KEY];

/// The resource's state, as read at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The fencing token of the last accepted write.
    pub(crate) fence: Option<u64>,
    /// Who made that write.
    pub(crate) writer: Option<String>,
    /// How many writes were accepted.
    pub(crate) writes: u64,
}

/// A storage service that checks fencing tokens: it accepts a write only if its token is
/// greater than that of every write it accepted before, so a holder whose lease ran out while
/// it was stalled cannot overwrite the work of the holder after it.
#[derive(Debug)]
pub(crate) struct FencedResource {
    script: Script,
}

impl FencedResource {
    /// The resource at [`RESOURCE_KEY`].
    pub(crate) fn new() -> Self {
        Self {
            script: Script::new(include_str!("fenced_write.lua")),
        }
    }

    /// Writes as `writer` with `fencing_token`; `true` if the resource accepted the write,
    /// `false` if it rejected it as stale.
    pub(crate) async fn write(
        &self,
        conn: &mut MultiplexedConnection,
        fencing_token: u64,
        writer: &str,
    ) -> RedisResult<bool> {
        let accepted: i64 = self
            .script
            .key(RESOURCE_KEY)
            .arg(fencing_token)
            .arg(writer)
            .invoke_async(conn)
            .await?;
        Ok(accepted == 1)
    }

    /// The fencing token of the last accepted write, if any.
    pub(crate) async fn fence(conn: &mut MultiplexedConnection) -> RedisResult<Option<u64>> {
        conn.hget(RESOURCE_KEY, "fence").await
    }

    /// The resource's whole state.
    pub(crate) async fn snapshot(conn: &mut MultiplexedConnection) -> RedisResult<Snapshot> {
        let (fence, writer, writes): (Option<u64>, Option<String>, Option<u64>) =
            redis::cmd("HMGET")
                .arg(RESOURCE_KEY)
                .arg(&["fence", "writer", "writes"])
                .query_async(conn)
                .await?;
        Ok(Snapshot {
            fence,
            writer,
            writes: writes.unwrap_or(0),
        })
    }
}
