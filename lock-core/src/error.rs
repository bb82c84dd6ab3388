//! The one error type of every lock operation.

use std::fmt;
use std::time::Duration;

/// A boxed error from a backend's client library, kept as the `source` of [`LockError::Backend`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a lock operation can fail with.
///
/// `#[non_exhaustive]`: later backends and features add variants (quorum, lost lease), so a
/// `match` needs a wildcard arm. Use [`LockError::is_retryable`] to decide whether trying the
/// same call again can succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The caller's input was rejected before any I/O: empty or oversized name, a TTL of zero or
    /// beyond [`MAX_TTL`](crate::MAX_TTL), a wait that overflows the clock. Nothing was sent.
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// Which rule was broken, in words.
        reason: String,
    },

    /// A deadline passed. `phase` says which one: the caller's wait for the lock, the connect
    /// timeout or the per-command timeout of the backend.
    #[error("timed out {phase} after {elapsed:?}")]
    Timeout {
        /// Which deadline passed.
        phase: TimeoutPhase,
        /// Time spent in the operation when it gave up.
        elapsed: Duration,
    },

    /// The lock is held by another holder and the caller asked not to wait for it.
    #[error("lock {name:?} is held by another holder")]
    Busy {
        /// The lock name.
        name: String,
        /// The holder's remaining TTL as the backend reported it; `None` when the key has no
        /// expiry (a foreign key, or unknown).
        holder_ttl: Option<Duration>,
    },

    /// The lease is no longer ours: it expired and may have been taken by another holder.
    /// Returned by [`Guard::extend`](crate::Guard::extend) and
    /// [`Guard::release`](crate::Guard::release) (the critical section ran, at least at its
    /// end, without the lock); the new holder, if any, was left intact.
    #[error("the lease on {name:?} is no longer ours (it expired or was taken)")]
    NotOwned {
        /// The lock name.
        name: String,
    },

    /// The lease ended while its guard still lived: renewal failed for longer than the lease's
    /// validity, the backend said the lock is no longer ours, or a fixed TTL ran out. Returned
    /// by [`LockRequest::run`](crate::LockRequest::run) after cancelling the work.
    #[error("the lease on {name:?} was lost while the work ran")]
    Lost {
        /// The lock name.
        name: String,
    },

    /// The stop signal the request was tied to fired ([`LockRequest::stop_on`](crate::LockRequest::stop_on),
    /// e.g. [`shutdown`](crate::shutdown)): a wait for the lock was given up, or the work was
    /// cancelled and the lock released. Nothing is left behind.
    #[error("the request for {name:?} was stopped by its stop signal")]
    Stopped {
        /// The lock name.
        name: String,
    },

    /// The key under the lock name holds a value that no lock layout uses (for example a hash
    /// or a list written by someone else). Nothing was overwritten.
    #[error("key {key:?} holds a value of the wrong type for a lock: {detail}")]
    WrongType {
        /// The backend key.
        key: String,
        /// What the backend said.
        detail: String,
    },

    /// Fewer than a quorum of a multi-node backend's nodes (Redlock: `N/2 + 1` of all N) said
    /// yes, because nodes failed or timed out. Whatever the nodes granted has been (or is being)
    /// released by the backend. `source` holds the backend's detailed tally.
    #[error(
        "{backend} {op}: quorum not reached, {granted} of the {required} nodes needed said yes"
    )]
    QuorumNotReached {
        /// Which backend (`"redlock"`).
        backend: &'static str,
        /// The operation.
        op: Op,
        /// Nodes that said yes.
        granted: usize,
        /// The quorum.
        required: usize,
        /// Whether trying again may succeed: false only when errors that will not go away (a
        /// wrong password) alone rule out a quorum.
        retryable: bool,
        /// The backend's details (for Redlock, `lock_redlock::QuorumNotReached`).
        #[source]
        source: BoxError,
    },

    /// The backend does not offer this lock kind (Redlock and PostgreSQL answer it for read-write
    /// locks and semaphores). Nothing was sent.
    #[error("the {backend} backend does not offer {kind} locks")]
    Unsupported {
        /// Which backend.
        backend: &'static str,
        /// The kind asked for: `"read"`, `"write"`, `"semaphore"` (see [`Kind::label`](crate::Kind::label)).
        kind: &'static str,
    },

    /// The current task holds a read share of the name and asked for its write lock. Upgrading
    /// in place is refused rather than waited for: two readers upgrading at once would each
    /// wait for the other's read share for ever (a self-deadlock). Release the read guard, then
    /// ask to write. Nothing was sent.
    #[error("the current task holds a read share of {name:?}: release it before asking to write")]
    UpgradeRefused {
        /// The lock name.
        name: String,
    },

    /// A semaphore was asked for with another permit count than its holders use: `max` here,
    /// `held_max` by the permits held now. Mixed counts would let more holders in than either
    /// side allows, so the request is refused and nothing is changed. (A semaphore nobody
    /// holds takes the count of its next holder.)
    #[error("semaphore {name:?} has {held_max} permits, this request says {max}")]
    PermitsMismatch {
        /// The semaphore's name.
        name: String,
        /// The permit count this request gave.
        max: u32,
        /// The permit count the current holders gave.
        held_max: u32,
    },

    /// A fenced write was refused: the store has already accepted a larger fencing token for
    /// `resource`, so this writer's grant is older than another holder's (it was paused or cut
    /// off past its lease). Nothing of the write applied. Not retryable: the same token is
    /// refused again; acquire the lock anew and write with the new grant's token. See
    /// [`Fence`](crate::Fence).
    #[error(
        "fenced write to {resource:?} refused: token {token} is older than the accepted {current}"
    )]
    Fenced {
        /// The fenced resource.
        resource: String,
        /// The token this write carried.
        token: u64,
        /// The largest token the resource has accepted.
        current: u64,
    },

    /// A count-down latch will not open: `lost` of its parties left without counting down
    /// (their leases ended: a crash, a lost lease, a party dropped before its count-down).
    /// Returned by [`Latch::wait`](crate::Latch::wait) instead of waiting for a count-down
    /// that will never come. Not retryable: the latch stays broken until its records expire
    /// ([`Latch::keep`](crate::Latch::keep)).
    #[error("latch {name:?} is broken: {lost} of its parties left without counting down")]
    Broken {
        /// The latch's name.
        name: String,
        /// How many parties left without counting down.
        lost: u32,
    },

    /// The backend failed: connection refused or dropped, authentication, an error reply.
    #[error("{backend} backend failed during {op}: {source}")]
    Backend {
        /// Which backend (`"redis"`, `"memory"`, ...).
        backend: &'static str,
        /// The operation that failed.
        op: Op,
        /// Whether the same call may succeed if tried again (the connection may come back; a
        /// wrong password will not).
        retryable: bool,
        /// The client library's error.
        #[source]
        source: BoxError,
    },
}

impl LockError {
    /// Whether trying the same call again may succeed: `true` for timeouts, [`LockError::Busy`]
    /// and transient backend failures (I/O, connection dropped or refused, server loading);
    /// `false` for invalid input, a lease no longer ours, a fenced write refused, wrong-type
    /// keys, authentication and other error replies.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Timeout { .. } | Self::Busy { .. } => true,
            Self::Backend { retryable, .. } | Self::QuorumNotReached { retryable, .. } => {
                *retryable
            }
            Self::InvalidInput { .. }
            | Self::Unsupported { .. }
            | Self::UpgradeRefused { .. }
            | Self::PermitsMismatch { .. }
            | Self::NotOwned { .. }
            | Self::Lost { .. }
            | Self::Stopped { .. }
            | Self::Fenced { .. }
            | Self::Broken { .. }
            | Self::WrongType { .. } => false,
        }
    }

    /// Shorthand for [`LockError::InvalidInput`].
    pub fn invalid(reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            reason: reason.into(),
        }
    }

    /// Whether an acquire that failed with this error may still have reached the backend and
    /// taken the lock, so whoever sent it must release its token. Only input rejected before
    /// I/O, refusals the backend made atomically, and quorum failures (whose backend releases
    /// what its nodes granted) are known to leave nothing behind.
    #[must_use]
    pub fn may_have_applied(&self) -> bool {
        !matches!(
            self,
            Self::InvalidInput { .. }
                | Self::Unsupported { .. }
                | Self::UpgradeRefused { .. }
                | Self::PermitsMismatch { .. }
                | Self::WrongType { .. }
                | Self::Busy { .. }
                | Self::QuorumNotReached { .. }
                | Self::Fenced { .. }
                | Self::Stopped { .. }
        )
    }
}

/// Which deadline a [`LockError::Timeout`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// The caller's wait for a held lock ran out (`LockRequest::wait`).
    Wait,
    /// Connecting to the backend (or getting a connection from its pool) took too long.
    Connect,
    /// The backend did not answer a command in time; the command may still have been applied.
    Command,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Wait => "waiting for the lock",
            Self::Connect => "connecting to the backend",
            Self::Command => "waiting for the backend's reply",
        })
    }
}

/// The backend operation an error happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Connecting or getting a connection.
    Connect,
    /// An acquire attempt.
    Acquire,
    /// Extending a lease.
    Extend,
    /// Releasing a lease.
    Release,
    /// A fenced write to the protected resource (a store's fence, an etcd guarded
    /// transaction), made on the holder's behalf.
    Write,
    /// A read that changes nothing: a holder's description, an operator's listing or look at
    /// one lock (`distlock ls`, `show`).
    Read,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Connect => "connect",
            Self::Acquire => "acquire",
            Self::Extend => "extend",
            Self::Release => "release",
            Self::Write => "write",
            Self::Read => "read",
        })
    }
}
