//! Ending a guard's lease: hand the lock to the next task of this process that waits for the
//! name, or release it.

use std::sync::Arc;

use crate::backend::{Handover, Lock};
use crate::runtime::cleanup::ReleaseOnDrop;
use crate::runtime::waiters::Waiters;
use crate::{Lease, LockError, Token};

/// Ends `lease`: a mutex lease is handed to the head of this process's line for the name when there is one
/// (see [`Waiters::successor`]) and the backend can ([`Lock::hand_over`]); otherwise releases
/// it. Returns `true` if the lease was still ours (released or handed on), `false` if not.
///
/// A handover that fails falls back to the plain release. One that may have reached the
/// backend (a timeout) is undone by releasing the new token in the background, so neither
/// token keeps the lock past this call's answer, except for a release that fails outright.
///
/// # Cancel safety
/// Not cancel safe on its own: the caller keeps a [`ReleaseOnDrop`] for `lease` armed around
/// it. A handover in flight when dropped is undone in the background.
pub(crate) async fn end_lease(
    lock: &Arc<dyn Lock>,
    waiters: Option<&Arc<Waiters>>,
    lease: &Lease,
) -> Result<bool, LockError> {
    if let Some(waiters) = waiters
        && lease.kind() == crate::Kind::Mutex
        && let Some(ttl) = waiters.successor(lease.name())
        && let Ok(token) = Token::generate()
    {
        // Armed until the backend answers: a cancelled or timed-out handover leaves nothing.
        let pending = ReleaseOnDrop::new(
            Arc::clone(lock),
            Lease::new(lease.name(), token, 0, tokio::time::Instant::now()),
        );
        match lock.as_ref().hand_over(lease, token, ttl).await {
            Ok(Handover::Handed(next)) => {
                pending.disarm();
                tracing::trace!(name = lease.name(), "lock handed to the next local waiter");
                waiters.hand(Arc::clone(lock), next);
                return Ok(true);
            }
            Ok(Handover::NotOwned) => {
                pending.disarm();
                waiters.released(lease.name());
                return Ok(false);
            }
            Ok(Handover::Unsupported) => pending.disarm(),
            Err(error) if error.may_have_applied() => {
                tracing::debug!(%error, "handing the lock over failed; releasing instead");
                drop(pending);
            }
            Err(error) => {
                tracing::debug!(%error, "handing the lock over failed; releasing instead");
                pending.disarm();
            }
        }
    }
    let result = lock.as_ref().release(lease).await;
    // Whatever the answer, the next local waiter should look now.
    if let Some(waiters) = waiters {
        waiters.released(lease.name());
    }
    result
}
