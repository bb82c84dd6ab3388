//! Redlock's own failures, carried as the `source` of a [`LockError`] (`QuorumNotReached`, or
//! `Backend` for [`ValidityExpired`]).

use std::time::Duration;

use lock_core::{LockError, Op};

use crate::tally::Tally;

/// The backend label of a Redlock, in errors, logs and the `Locker`'s metrics.
pub const BACKEND: &str = "redlock";

/// Fewer than a quorum (`N/2 + 1` of all N nodes) said yes, because nodes failed or timed out.
///
/// Returned as the `source` of [`LockError::QuorumNotReached`] (which carries `granted`,
/// `required` and `retryable` itself); find the full tally with `error.source()` and
/// `downcast_ref::<QuorumNotReached>()`:
///
/// ```
/// use std::error::Error as _;
/// use lock_core::LockError;
/// use lock_redlock::QuorumNotReached;
///
/// fn quorum_failure(error: &LockError) -> Option<&QuorumNotReached> {
///     error.source()?.downcast_ref::<QuorumNotReached>()
/// }
/// ```
///
/// For an acquire, "yes" is a grant; for an extend, an extension; for a release, a release of a
/// key that still held our token. When the refusals alone rule out a quorum (the name is held by
/// someone else, or the lease is no longer ours), the answer is instead a normal one: busy,
/// [`LockError::NotOwned`] (through `Guard::extend`) or `Ok(false)` from a release.
///
/// Its `source` is the first error a node returned.
#[derive(Debug, thiserror::Error)]
#[error(
    "redlock quorum not reached for {op}: {granted} of {nodes} nodes said yes, {required} needed \
     ({refused} refused, {failed} failed or timed out, {unanswered} not yet answered)"
)]
#[non_exhaustive]
pub struct QuorumNotReached {
    /// The operation.
    pub op: Op,
    /// Nodes that said yes.
    pub granted: usize,
    /// The quorum: `nodes / 2 + 1`.
    pub required: usize,
    /// All nodes (N).
    pub nodes: usize,
    /// Nodes that said no (busy, or not ours).
    pub refused: usize,
    /// Nodes that failed or timed out.
    pub failed: usize,
    /// Nodes that had not answered when the outcome was decided (their answers are handled in
    /// the background: released, if they granted an acquire that failed).
    pub unanswered: usize,
    #[source]
    first_error: Option<LockError>,
}

impl QuorumNotReached {
    pub(crate) fn new(op: Op, tally: &Tally, first_error: Option<LockError>) -> Self {
        Self {
            op,
            granted: tally.yes,
            required: tally.quorum,
            nodes: tally.nodes,
            refused: tally.no,
            failed: tally.failed,
            unanswered: tally.pending(),
            first_error,
        }
    }

    /// The first error a node returned, if any.
    #[must_use]
    pub fn first_error(&self) -> Option<&LockError> {
        self.first_error.as_ref()
    }

    /// As the [`LockError::QuorumNotReached`] it travels in: retryable unless the
    /// non-retryable node errors (a wrong password, say) alone rule out a quorum.
    pub(crate) fn into_lock_error(self, retryable: bool) -> LockError {
        LockError::QuorumNotReached {
            backend: BACKEND,
            op: self.op,
            granted: self.granted,
            required: self.required,
            retryable,
            source: Box::new(self),
        }
    }
}

/// A quorum said yes, but too late: `ttl − elapsed − drift` left nothing of the lease (or
/// extension). The nodes that said yes are released (acquire) or left to expire (extend).
///
/// Returned as the `source` of a retryable [`LockError::Backend`] with `backend: "redlock"`.
/// Persistent, it means the nodes answer slowly against the TTL: use a longer TTL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "redlock {op}: a quorum ({granted} nodes) said yes after {elapsed:?}, but a {ttl:?} TTL less \
     the {drift:?} drift allowance leaves no validity"
)]
#[non_exhaustive]
pub struct ValidityExpired {
    /// The operation (acquire or extend).
    pub op: Op,
    /// Nodes that said yes.
    pub granted: usize,
    /// The TTL asked for.
    pub ttl: Duration,
    /// Time from sending the requests to the quorum's last answer.
    pub elapsed: Duration,
    /// The clock-drift allowance for this TTL.
    pub drift: Duration,
}

impl ValidityExpired {
    pub(crate) fn into_lock_error(self) -> LockError {
        LockError::Backend {
            backend: BACKEND,
            op: self.op,
            retryable: true,
            source: Box::new(self),
        }
    }
}

/// The round's task ended without answering: it panicked or the runtime is shutting down.
pub(crate) fn round_lost(op: Op) -> LockError {
    LockError::Backend {
        backend: BACKEND,
        op,
        retryable: true,
        source: "the redlock round ended without an answer (runtime shutting down?)".into(),
    }
}
