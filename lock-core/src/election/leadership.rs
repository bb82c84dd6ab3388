//! What the elected candidate holds.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::{Guard, Lease, LeaseWatch, LockError};

/// This process leads the election: the guard of its term's lease, renewed while it lives.
/// Made by [`Election::campaign`](super::Election::campaign).
///
/// Dropping it resigns (the lease is released in the background, like a dropped
/// [`Guard`]); [`resign`](Leadership::resign) does so now and says whether the term was
/// still ours.
#[must_use = "dropping a Leadership resigns at once (in the background)"]
pub struct Leadership {
    guard: Guard,
    value: Arc<[u8]>,
    since: SystemTime,
}

impl Leadership {
    pub(super) fn new(guard: Guard, value: Arc<[u8]>, since: SystemTime) -> Self {
        Self {
            guard,
            value,
            since,
        }
    }

    /// The term: the fencing token of this leadership's grant, larger than every earlier
    /// leader's. Pass it with every write to the resource the leader guards.
    #[must_use]
    pub fn term(&self) -> u64 {
        self.guard.fencing_token()
    }

    /// The value this candidate campaigned with, which observers see.
    #[must_use]
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// When this candidate was elected (its wall clock).
    #[must_use]
    pub fn since(&self) -> SystemTime {
        self.since
    }

    /// The election's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// Whether this process still leads as far as it knows: the lease not lost and its stop
    /// point not passed.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.guard.is_held()
    }

    /// The local instant after which the lease must be assumed gone.
    #[must_use]
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until()
    }

    /// How long before [`valid_until`](Leadership::valid_until) the leader is told to stop.
    #[must_use]
    pub fn stop_margin(&self) -> Duration {
        self.guard.stop_margin()
    }

    /// Resolves when the leadership ends while this value lives: the lease was found taken,
    /// or its stop point passed without a renewal (renewals failing). It fires the stop
    /// margin before the lease ends, so the leader stops while it still leads. See
    /// [`Guard::lost`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// Resolves when a renewal failed while the lease is still valid (or it is lost): the
    /// moment to stop taking new work. See [`Guard::at_risk`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn at_risk(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.at_risk()
    }

    /// A cheap, cloneable view of the term's lease for the leader's work (its
    /// `fencing_token()` is the term).
    #[must_use]
    pub fn lease_watch(&self) -> LeaseWatch {
        self.guard.lease_watch()
    }

    /// Gives the leadership up now: stops the renewal and releases the lock, which wakes the
    /// other candidates (at once where the backend announces releases).
    ///
    /// # Errors
    /// [`LockError::NotOwned`] when the term had already ended (the lock expired or was
    /// taken): the leader worked, at least at the end, without leading. The backend's errors
    /// otherwise; the lock then expires at the end of its lease.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the release is finished in the background.
    pub async fn resign(self) -> Result<(), LockError> {
        self.guard.release().await
    }

    /// Keeps the leadership without renewing it, for a process about to restart: store
    /// `lease.to_string()` and take it back with
    /// [`Election::resume`](super::Election::resume) before the lease runs out.
    pub fn leak(self) -> Lease {
        self.guard.leak()
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("name", &self.name())
            .field("term", &self.term())
            .field("value", &String::from_utf8_lossy(&self.value))
            .field("since", &self.since)
            .field("leading", &self.is_leader())
            .finish()
    }
}
