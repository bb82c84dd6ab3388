//! Revocation (Curator's `InterProcessMutex.makeRevocable`), the revoker's side: another
//! process asks the holder of a lock to give it up; the holder's guard is told
//! ([`Guard::revoked`](crate::Guard::revoked)) and decides.
//!
//! Written once over the contract: the request is a record of its own in the store, a grant of
//! the name `NAME:distlock-revoke:TOKEN` (the lock's name and the fencing token of the grant it
//! is for) with a note, taken by [`Locker::revoke`] with the backend's own `try_acquire` and
//! `annotate`. The holder of a [revocable](crate::LockRequest::revocable) lease reads it with
//! `describe_holder` after each renewal, and at once where the backend announces releases: the
//! revoker rings a bell (takes and releases a name of the grant's), which the holder watches
//! (`runtime/revocation.rs`). It reaches only that grant: a later holder of the name has
//! another token, and the record expires by itself. The backends that describe their holders
//! with their fencing token, and whose tokens are ordered, offer it
//! (`Capabilities::offers_revocation`): not a Redlock, whose holder's token is known only from
//! a note.

use std::time::Duration;

use super::handle::Locker;
use crate::backend::{Attempt, Lock};
use crate::metric;
use crate::runtime::revocation::{bell_name, revocation_name};
use crate::{Kind, LockError, Token, check_name, check_note};

/// How long the bell is held while it is rung (it is released at once).
const BELL_TTL: Duration = Duration::from_secs(5);

/// How long a record lives when the holder's TTL is not known.
const RECORD_TTL: Duration = Duration::from_secs(60);

impl Locker {
    /// Asks the current holder of the lock `name` to give it up: the holder's
    /// [`Guard::revoked`](crate::Guard::revoked) fires if its request was
    /// [`revocable`](crate::LockRequest::revocable), and the holder decides (release, or carry
    /// on: a holder that ignores it keeps the lock). Unlike a forced release, nothing is taken
    /// from under running work. `note` says why (shown to the holder,
    /// [`Guard::revocation_note`](crate::Guard::revocation_note)).
    ///
    /// The request is for the grant that holds the name now (its fencing token), not for the
    /// name: a later holder is not asked. It reaches the holder at its next renewal (every
    /// third of its lease), and lives in the store for twice the holder's remaining TTL plus a
    /// second. Counted in `distlock_revocations_total{event="sent"}`.
    ///
    /// Returns the fencing token of the grant asked, or `None` when nobody holds the name.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] (kind `"revocation"`) on a backend that does not describe
    /// its holders or whose fencing tokens are not ordered (advisory locks, `fencing(false)`,
    /// a Redlock over plain counters), before any I/O; [`LockError::InvalidInput`] for a bad name (or one too long to carry the record's
    /// suffix) or note; the backend's errors.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the request was written or not; a record written expires by
    /// itself.
    pub async fn revoke(&self, name: &str, note: Option<&str>) -> Result<Option<u64>, LockError> {
        check_name(name)?;
        if let Some(note) = note {
            check_note(note.as_bytes())?;
        }
        let lock = self.backend_lock().as_ref();
        check_revocable(lock)?;
        check_name(&revocation_name(name, u64::MAX))?;
        let Some(holder) = lock.describe_holder(name).await? else {
            return Ok(None);
        };
        let record = revocation_name(name, holder.fencing_token);
        let ttl = holder.ttl.map_or(RECORD_TTL, |left| {
            left.saturating_mul(2)
                .saturating_add(Duration::from_secs(1))
        });
        let token = Token::generate()?;
        match lock
            .try_acquire(&record, token, ttl.min(crate::MAX_TTL))
            .await?
        {
            Attempt::Acquired(lease) => {
                if let Some(note) = note {
                    lock.annotate(&lease, note.as_bytes()).await?;
                }
            }
            // Asked already (the first request's note stands).
            Attempt::Busy { .. } => {}
        }
        // Where releases are announced, the holder listens for its grant's bell: taking and
        // releasing it reaches the holder within the announcement's latency instead of at its
        // next renewal. A bell that cannot be rung leaves the request to that renewal.
        if lock.capabilities().announces_releases {
            let bell = bell_name(name, holder.fencing_token);
            if let Ok(Attempt::Acquired(lease)) =
                lock.try_acquire(&bell, Token::generate()?, BELL_TTL).await
            {
                // A second try, busy, marks that someone waits: a backend may announce a
                // release only to waiters that marked it (lock-redis does, to save a PUBLISH).
                let _ = lock.try_acquire(&bell, Token::generate()?, BELL_TTL).await;
                let _ = lock.release(&lease).await;
            }
        }
        self.labels(Kind::Mutex, None)
            .count_with(metric::REVOCATIONS_TOTAL, "event", "sent");
        Ok(Some(holder.fencing_token))
    }
}

/// Refuses revocation on a backend without holder descriptions or ordered fencing tokens.
pub(super) fn check_revocable(lock: &dyn Lock) -> Result<(), LockError> {
    // The request names the grant by its fencing token, as the store describes the holder.
    if lock.capabilities().offers_revocation() {
        Ok(())
    } else {
        Err(LockError::Unsupported {
            backend: lock.backend(),
            kind: "revocation",
        })
    }
}
