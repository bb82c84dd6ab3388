//! The double barrier: `parties` members enter together and leave together; a member that
//! crashes is counted out when its lease ends.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{Coordination, CoordinationRecord, Poll, Shared};
use crate::{Guard, Lease, LockError, Locker, MAX_PERMITS};

/// A double barrier (Curator's `DistributedDoubleBarrier`) whose members hold leases
/// ([`Locker::barrier`]): [`enter`](Barrier::enter) returns once `parties` members are in at
/// once, and [`leave`](BarrierMember::leave) once every member has left.
///
/// **A member that crashes is counted out.** In the peers, a member that dies between
/// entering and leaving keeps the others in [`leave`](BarrierMember::leave) for ever (and one
/// that dies while the barrier fills holds a place it will never use). Here each member's
/// place is a renewed lease: a crashed member's ends at most one lease after the crash, and
/// then it is no longer counted. A barrier still filling frees its place for another member;
/// members leaving stop waiting for it.
///
/// **Rounds.** The barrier opens when `parties` members are in at once, and stays open until
/// every member that passed it has left: a member entering meanwhile (into a place freed by a
/// member that left) passes at once and is waited for by those leaving. Once all have left,
/// the name serves the next round. More than `parties` members entering at once wait for a
/// place (at most [`Barrier::wait_at_most`]).
///
/// Kept in the store as two semaphores under names derived from `name`:
/// `NAME:distlock-barrier` (the members in, `parties` permits) and
/// `NAME:distlock-barrier-open` (the members that passed and have not left). Offered on every
/// backend with semaphores; [`LockError::Unsupported`] (kind `"barrier"`) elsewhere, before
/// any I/O. Waits read the store every 20 ms at first, then every 200 ms at most (a new grant
/// is announced by no backend).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_core::LockError> {
/// use lock_core::{Locker, MemoryLock};
///
/// let locker = Locker::new(MemoryLock::new());
/// let workers: Vec<_> = (0..3)
///     .map(|_| {
///         let barrier = locker.barrier("nightly:reindex", 3);
///         tokio::spawn(async move {
///             let member = barrier.enter().await?; // all three start together
///             // ... work ...
///             member.leave().await // and finish together
///         })
///     })
///     .collect();
/// for worker in workers {
///     worker.await.expect("a worker")?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Barrier {
    shared: Shared,
}

/// A barrier's members, read from the store ([`Barrier::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BarrierState {
    /// The members it waits for.
    pub parties: u32,
    /// The members in now (entered, not left, lease not ended).
    pub present: u32,
    /// The members that passed and have not left: more than zero, the barrier is open.
    pub passed: u32,
}

impl BarrierState {
    /// Whether the barrier is open: full, or passed by members that have not left.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.present >= self.parties || self.passed > 0
    }
}

impl Barrier {
    pub(super) fn new(locker: Locker, name: Arc<str>, parties: u32) -> Self {
        Self {
            shared: Shared::new(locker, name, Coordination::Barrier, parties),
        }
    }

    super::shared_options!(
        "member",
        "[`Barrier::enter`] and [`BarrierMember::leave`] each wait"
    );

    /// Reads the barrier's members from the store.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] on a backend without semaphores and
    /// [`LockError::InvalidInput`] for a bad name, count or lease, before any I/O; the
    /// backend's errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn state(&self) -> Result<BarrierState, LockError> {
        self.shared.check()?;
        Ok(BarrierState {
            parties: self.shared.count,
            present: self.shared.count(CoordinationRecord::Parties).await?,
            passed: self.shared.count(CoordinationRecord::Open).await?,
        })
    }

    /// Enters: takes a place (a renewed lease), then waits until the barrier is open (see
    /// the rounds above), each at most [`Barrier::wait_at_most`].
    ///
    /// # Errors
    /// As [`Barrier::state`]; [`LockError::Timeout`] (phase `Wait`) when no place freed or the barrier did not fill
    /// in time (the place is given up); [`LockError::Lost`] when the place's lease was lost
    /// while waiting; [`LockError::PermitsMismatch`] when its members use another count.
    ///
    /// # Cancel safety
    /// Cancel safe: the place of a dropped enter is released, as any guard's.
    pub async fn enter(&self) -> Result<BarrierMember, LockError> {
        self.shared.check()?;
        let shared = &self.shared;
        let bound = shared.wait_bound();
        let place = shared
            .take(CoordinationRecord::Parties, shared.count, bound)
            .await?;
        let mut poll = Poll::new(bound);
        loop {
            if self.state().await?.is_open() {
                break;
            }
            if !place.is_held() {
                return Err(LockError::Lost {
                    name: shared.name.to_string(),
                });
            }
            if let Err(timeout) = poll.pause().await {
                let _ = place.release().await;
                return Err(timeout);
            }
        }
        // Passed: held until this member has left, so those who enter meanwhile see the
        // barrier open even after a member has left it.
        let passed = shared
            .take(CoordinationRecord::Open, MAX_PERMITS, bound)
            .await?;
        Ok(BarrierMember {
            place,
            passed,
            barrier: self.clone(),
        })
    }
}

/// A member of a [`Barrier`] that passed it: its place and its pass, renewed leases both,
/// until it [`leave`](BarrierMember::leave)s. Dropped, it leaves without waiting.
#[derive(Debug)]
pub struct BarrierMember {
    place: Guard,
    passed: Guard,
    barrier: Barrier,
}

impl BarrierMember {
    /// Leaves: gives the place up, then waits until every member has left (a crashed one is
    /// counted out when its lease ends), at most [`Barrier::wait_at_most`]; then gives the
    /// pass up.
    ///
    /// # Errors
    /// [`LockError::Timeout`] (phase `Wait`) when members were still in at the bound (the
    /// pass is given up); the backend's errors.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the member's leases are released, as any guard's.
    pub async fn leave(self) -> Result<(), LockError> {
        let shared = &self.barrier.shared;
        match self.place.release().await {
            // Lost already: counted out.
            Ok(()) | Err(LockError::NotOwned { .. }) => {}
            Err(other) => return Err(other),
        }
        let mut poll = Poll::new(shared.wait_bound());
        let waited = loop {
            if shared.count(CoordinationRecord::Parties).await? == 0 {
                break Ok(());
            }
            if let Err(timeout) = poll.pause().await {
                break Err(timeout);
            }
        };
        match self.passed.release().await {
            Ok(()) | Err(LockError::NotOwned { .. }) => waited,
            Err(other) => waited.and(Err(other)),
        }
    }

    /// Resolves when the member's place is lost (it is counted out): see [`Guard::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.place.lost()
    }

    /// The member's place: its lease, fencing token and validity.
    pub fn guard(&self) -> &Guard {
        &self.place
    }

    /// Stops renewing without leaving, as a crashed process would: the member is counted out
    /// when its leases run out. For tests and hand-over (see [`Guard::leak`]).
    #[must_use]
    pub fn leak(self) -> (Lease, Lease) {
        (self.place.leak(), self.passed.leak())
    }
}
