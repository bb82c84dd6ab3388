//! The kinds of lock on Redis, one file each: which script each operation runs, on which keys
//! ([`Keys`](crate::layout::Keys)), and what its reply means. Each is a set of functions over
//! the [`Executor`](crate::executor::Executor), which runs the commands, and the lock's
//! [`Grants`]; `RedisLock`'s `impl Lock` picks the kind. The layouts are in the crate README
//! ("Read-write locks and semaphores") and the scripts' headers (`lua/read_acquire.lua` and the
//! rest).

pub(crate) mod fair;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod note;
pub(crate) mod read_write;
pub(crate) mod semaphore;

use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token};
use tokio::time::Instant;

use crate::connection::conn::Conn;
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
    /// `[1, fence]`: granted; the lease, with that fencing token.
    Granted(Lease),
    /// `[0, busy ms, announces]`: busy.
    Busy(Attempt),
}

/// Reads a kind's acquire reply: `[1, fence]` granted (a lease of `name` for `token`, valid
/// until `valid`), `[0, busy ms, announces]` busy, `[-1, held max]` a semaphore that `name`'s
/// holders gave another size.
fn read_reply(
    answer: &[i64],
    name: &str,
    token: Token,
    kind: Kind,
    valid: Instant,
) -> Result<Reply, LockError> {
    match *answer {
        [1, fence] => {
            let fencing_token = u64::try_from(fence).unwrap_or(0);
            Ok(Reply::Granted(
                Lease::new(name, token, fencing_token, valid).with_kind(kind),
            ))
        }
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

/// The attempt a kind's acquire `reply` on `conn` comes to: a grant once the replicas confirm
/// it (else it is given back with `release` and the confirmation's error returned), or busy.
async fn settle_reply<F, R>(
    exec: &Executor,
    conn: &mut Conn,
    key: &str,
    reply: Reply,
    release: F,
) -> Result<Attempt, LockError>
where
    F: FnOnce(Lease) -> R,
    R: Future<Output = Result<bool, LockError>>,
{
    match reply {
        Reply::Granted(lease) => {
            confirm_grant(exec, conn, key, || release(lease.clone())).await?;
            Ok(Attempt::Acquired(lease))
        }
        Reply::Busy(busy) => Ok(busy),
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
