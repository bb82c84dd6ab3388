//! The kinds of lock on Redis, one file each: which script each operation runs, on which keys
//! ([`Keys`](crate::layout::Keys)), and what its reply means. Each is a set of functions over
//! the [`Executor`](crate::executor::Executor), which runs the commands, and the lock's
//! [`Grants`]; `RedisLock`'s `impl Lock` picks the kind. The layouts are in the crate README
//! ("Read-write locks and semaphores") and the scripts' headers (`lua/read_acquire.lua` and the
//! rest).

pub(crate) mod fair;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod read_write;
pub(crate) mod semaphore;

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, LockError, Op};

use crate::conn::Conn;
use crate::error::BACKEND;
use crate::executor::Executor;
use crate::holder::Describe;
use crate::scripts::Releases;
use crate::topology::Topology;

/// What a lock's grants write and how its releases announce: the settings every kind reads.
pub(crate) struct Grants {
    /// Whether mutex grants carry fencing tokens (the acquire script) or not (a plain `SET NX`).
    fencing: bool,
    /// How long a fencing counter is kept after its last grant, in ms.
    fence_retention_ms: u64,
    /// What each grant writes about its holder, when built with holder metadata.
    holder: Option<Describe>,
    /// The release scripts, announcing the way the topology hears.
    releases: Releases,
}

impl Grants {
    pub(crate) fn new(
        fencing: bool,
        fence_retention_ms: u64,
        holder: Option<Describe>,
        topology: Topology,
    ) -> Self {
        Self {
            fencing,
            fence_retention_ms,
            holder,
            releases: Releases::on(topology),
        }
    }

    /// Whether mutex grants carry fencing tokens.
    pub(crate) fn fencing(&self) -> bool {
        self.fencing
    }

    /// How long a fencing counter is kept after its last grant, in ms.
    pub(crate) fn fence_retention_ms(&self) -> u64 {
        self.fence_retention_ms
    }
}

/// A script's `1`/`0` flag argument.
fn flag(on: bool) -> &'static str {
    if on { "1" } else { "0" }
}

/// What the acquire script of a read-write lock, a semaphore or a fair lock answered.
enum Reply {
    /// `[1, fence]`: granted, with this fencing token.
    Granted(u64),
    /// `[0, busy ms, announces]`: busy.
    Busy(Attempt),
}

/// Reads a kind's acquire reply: `[1, fence]` granted, `[0, busy ms, announces]` busy,
/// `[-1, held max]` a semaphore that `name`'s holders gave another size.
fn read_reply(answer: &[i64], name: &str, kind: Kind) -> Result<Reply, LockError> {
    match *answer {
        [1, fence] => Ok(Reply::Granted(u64::try_from(fence).unwrap_or(0))),
        // PTTL -1: a writer key without expiry (not one we wrote): no end known.
        [0, busy_ms, announces] => Ok(Reply::Busy(Attempt::Busy {
            holder_ttl: u64::try_from(busy_ms).ok().map(Duration::from_millis),
            announces: announces == 1,
        })),
        [-1, held_max] => Err(LockError::PermitsMismatch {
            name: name.to_owned(),
            max: match kind {
                Kind::Semaphore { max, .. } => max,
                _ => 0,
            },
            held_max: u32::try_from(held_max).unwrap_or(0),
        }),
        _ => Err(unexpected(format!(
            "unexpected {kind} acquire reply {answer:?}"
        ))),
    }
}

/// An acquire reply no script gives.
fn unexpected(what: String) -> LockError {
    LockError::Backend {
        backend: BACKEND,
        op: Op::Acquire,
        retryable: false,
        source: what.into(),
    }
}

/// Waits for replicas to confirm a grant made on `conn`, if the lock asks for it; a grant they
/// do not confirm is given back with `release` rather than held where a failover would lose it.
async fn confirm_grant<F, R>(
    exec: &Executor,
    conn: &mut Conn,
    key: &str,
    release: F,
) -> Result<(), LockError>
where
    F: FnOnce() -> R,
    R: Future<Output = Result<bool, LockError>>,
{
    let Err(error) = exec.confirm(conn, key, Op::Acquire).await else {
        return Ok(());
    };
    // Boxed: the give-back is rare, and inline it would grow every acquire's future.
    gave_back(Box::pin(release()).await);
    Err(error)
}

/// Logs a failed give-back of a grant that the replicas did not confirm: that grant is released
/// rather than held where a failover would lose it, and if even the release fails, it expires
/// at the end of its TTL.
fn gave_back(released: Result<bool, LockError>) {
    if let Err(release_error) = released {
        tracing::warn!(%release_error, "releasing an unconfirmed grant failed; it expires at the end of its TTL");
    }
}
