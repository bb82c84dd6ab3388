//! The RAII owner of a lease.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cleanup::{ReleaseOnDrop, spawn_release};
use crate::{Lease, Lock, LockError, check_ttl};

/// Owns a granted lease until [`Guard::release`], [`Guard::leak`] or drop.
///
/// Prefer `guard.release().await`: it tells whether the lease was still ours when it was
/// released. Dropping the guard also releases, but **not immediately**: the release is spawned
/// on the current tokio runtime and runs when the runtime gets to it (like sqlx's
/// `PgAdvisoryLockGuard`). Dropped outside a runtime, nothing is sent and the lock expires at the
/// end of its TTL.
///
/// The guard does not renew the lease: past [`Guard::valid_until`] the lock may belong to
/// someone else. Call [`Guard::extend`] in time, and hand [`Guard::fencing_token`] to the
/// resource you protect so it can reject a stale holder.
#[must_use = "dropping a Guard releases the lock at once (in the background)"]
pub struct Guard {
    lock: Arc<dyn Lock>,
    lease: Lease,
    /// Whether dropping the guard must release the lease (false after `release` and `leak`).
    armed: bool,
}

impl Guard {
    pub(crate) fn new(lock: Arc<dyn Lock>, lease: Lease) -> Self {
        Self {
            lock,
            lease,
            armed: true,
        }
    }

    /// The lease this guard owns.
    #[must_use]
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The lock name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.lease.name()
    }

    /// The fencing token of this grant; see [`Lease::fencing_token`].
    #[must_use]
    pub fn fencing_token(&self) -> u64 {
        self.lease.fencing_token()
    }

    /// The local monotonic instant after which the lease must be assumed gone.
    #[must_use]
    pub fn valid_until(&self) -> Instant {
        self.lease.valid_until()
    }

    /// Time left until [`Guard::valid_until`], zero once it has passed.
    #[must_use]
    pub fn remaining(&self) -> Duration {
        self.lease.remaining()
    }

    /// Extends the lease so it expires `ttl` from now, if it is still ours.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a TTL out of range (nothing sent);
    /// [`LockError::NotOwned`] when the lease already expired (the current holder, if any, is
    /// left intact); [`LockError::Timeout`] / [`LockError::Backend`] when the backend fails —
    /// the lease is then unchanged or extended, and `valid_until` is not moved.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the lease is unchanged or extended and the guard still owns it
    /// (with the old `valid_until`, which is the safe side).
    pub async fn extend(&mut self, ttl: Duration) -> Result<(), LockError> {
        check_ttl(ttl)?;
        match self.lock.extend(&self.lease, ttl).await? {
            Some(valid_until) => {
                self.lease.set_valid_until(valid_until);
                Ok(())
            }
            None => Err(LockError::NotOwned {
                name: self.lease.name().to_owned(),
            }),
        }
    }

    /// Releases the lease now. Returns `true` if it was still ours, `false` if it had expired
    /// (the key was left to whoever holds it now).
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend fails; the lock then
    /// expires at the end of its TTL.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the answer, the release is finished in the background.
    pub async fn release(mut self) -> Result<bool, LockError> {
        self.armed = false;
        let in_flight = ReleaseOnDrop::new(Arc::clone(&self.lock), self.lease.clone());
        let result = self.lock.release(&self.lease).await;
        in_flight.disarm();
        result
    }

    /// Gives up ownership without releasing: the lock stays held until its TTL runs out (or
    /// until the returned lease is released through the backend). For handing a lease to
    /// another process or keeping a job's lock across a restart.
    pub fn leak(mut self) -> Lease {
        self.armed = false;
        self.lease.clone()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.armed {
            spawn_release(Arc::clone(&self.lock), self.lease.clone());
        }
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("backend", &self.lock.backend())
            .field("lease", &self.lease)
            .field("armed", &self.armed)
            .finish()
    }
}
