//! The count-down latch: opens once `count` parties have counted down; a party that leaves
//! without counting down (its lease ended: a crash) breaks it, and its waiters are told.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{Coordination, CoordinationRecord, Poll, Shared};
use crate::{Guard, Lease, LockError, Locker};

/// How long a latch keeps its count-downs (and the record of who joined) by default: 10
/// minutes ([`Latch::keep`]).
pub const DEFAULT_LATCH_KEEP: Duration = Duration::from_secs(600);

/// A count-down latch (Redisson's `RCountDownLatch`, `java.util.concurrent.CountDownLatch`)
/// whose parties hold leases ([`Locker::latch`]): [`Latch::wait`] returns once `count`
/// count-downs have been made, by parties that each [`join`](Latch::join) (a renewed lease
/// of their own) and then [`count_down`](LatchParty::count_down).
///
/// **A party that crashes breaks the latch.** In the peers, a latch whose party dies before
/// counting down never opens, and its waiters wait for ever. Here the party's lease ends
/// (at most one lease after the crash), and every waiter gets
/// [`LockError::Broken`] with how many parties were lost: the count-down it waits for
/// will never come, and it can say so. A party dropped without counting down (its work
/// failed) breaks it the same way.
///
/// The latch is kept in the store as three semaphores of `count` permits under names derived
/// from `name` (`NAME:distlock-latch-parties`, `…-joined`, `…-done`): the parties present
/// (renewed leases), the parties that joined, and the count-downs (records that live
/// [`keep`](Latch::keep), 10 minutes by default). So a latch's outcome is there for waiters
/// who come late, and the name can serve a new latch once its records have expired. Offered
/// on every backend with semaphores; [`LockError::Unsupported`] (kind `"latch"`) elsewhere,
/// before any I/O.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_core::LockError> {
/// use lock_core::{Locker, MemoryLock};
///
/// let locker = Locker::new(MemoryLock::new());
/// let latch = locker.latch("batch:7:loaded", 2);
/// for shard in 0..2 {
///     let party = latch.join().await?;
///     // ... load shard `shard` ...
///     # let _ = shard;
///     party.count_down().await?;
/// }
/// latch.wait().await?; // both shards are loaded
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Latch {
    shared: Shared,
    keep: Duration,
}

/// A latch's count, read from the store ([`Latch::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatchState {
    /// The count-downs it waits for.
    pub count: u32,
    /// The count-downs made (at most `count`).
    pub counted_down: u32,
    /// The parties present now, which have joined and not counted down yet.
    pub parties: u32,
    /// The parties that joined (within the latch's `keep`): present, counted down or lost.
    pub joined: u32,
    /// The parties that joined and left without counting down (their lease ended): more than
    /// zero, the latch is broken.
    pub lost: u32,
}

impl LatchState {
    /// Whether every count-down has been made.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.counted_down >= self.count
    }

    /// Whether a party left without counting down, so the latch will not open.
    #[must_use]
    pub fn is_broken(&self) -> bool {
        !self.is_open() && self.lost > 0
    }
}

impl Latch {
    pub(super) fn new(locker: Locker, name: Arc<str>, count: u32) -> Self {
        Self {
            shared: Shared::new(locker, name, Coordination::Latch, count),
            keep: DEFAULT_LATCH_KEEP,
        }
    }

    super::shared_options!(
        "party",
        "[`Latch::join`] waits for a place and [`Latch::wait`] for the count-downs (a broken \
         latch ends a wait without a bound too)"
    );

    /// How long the count-downs and the record of who joined are kept in the store (default
    /// [`DEFAULT_LATCH_KEEP`]): for that long after its last count-down, the latch stays open
    /// for late waiters and its name cannot serve another latch.
    #[must_use]
    pub fn keep(mut self, keep: Duration) -> Self {
        self.keep = keep;
        self
    }

    fn check(&self) -> Result<(), LockError> {
        self.shared.check()?;
        crate::check_ttl(self.keep).map(drop)
    }

    /// Joins the latch as one of its parties: a renewed lease of one of its `count` places,
    /// waiting at most [`Latch::wait_at_most`] for one. Count down with the returned party.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] on a backend without semaphores and
    /// [`LockError::InvalidInput`] for a bad name, count, lease or keep, before any I/O;
    /// [`LockError::Timeout`] when no place
    /// freed in time; [`LockError::Busy`] when `count` parties have joined already (within
    /// `keep`); [`LockError::PermitsMismatch`] when its parties use another count; the
    /// backend's errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a place taken by a dropped join is released, as any guard's.
    pub async fn join(&self) -> Result<LatchParty, LockError> {
        self.check()?;
        let shared = &self.shared;
        let guard = shared
            .take(
                CoordinationRecord::Parties,
                shared.count,
                shared.wait_bound(),
            )
            .await?;
        // Present first, then joined: a reader that sees the joined record sees the party
        // present or its count-down (see `state`).
        if !shared
            .write(CoordinationRecord::Joined, shared.count, self.keep)
            .await?
        {
            guard.release().await?;
            return Err(LockError::Busy {
                name: shared.name.to_string(),
                holder_ttl: None,
            });
        }
        Ok(LatchParty {
            guard,
            latch: self.clone(),
        })
    }

    /// Joins and counts down at once: for a party whose part is done when it gets here.
    ///
    /// # Errors
    /// As [`Latch::join`] and [`LatchParty::count_down`].
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped after joining and before its count-down, the party has left
    /// without counting down, which breaks the latch.
    pub async fn count_down(&self) -> Result<(), LockError> {
        self.join().await?.count_down().await
    }

    /// Reads the latch's count from the store.
    ///
    /// # Errors
    /// As [`Latch::join`]'s checks; the backend's errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn state(&self) -> Result<LatchState, LockError> {
        self.check()?;
        let shared = &self.shared;
        // Joined, then present, then done: a party moves from present to done (done written
        // first), and every joined party was present before it joined, so no healthy party
        // is missed by all three reads and counted lost.
        let joined = shared.count(CoordinationRecord::Joined).await?;
        let parties = shared.count(CoordinationRecord::Parties).await?;
        let done = shared.count(CoordinationRecord::Done).await?;
        Ok(LatchState {
            count: shared.count,
            counted_down: done.min(shared.count),
            parties,
            joined,
            lost: joined.saturating_sub(done.saturating_add(parties)),
        })
    }

    /// Waits until every count-down has been made: at once if the latch is open already.
    ///
    /// # Errors
    /// [`LockError::Broken`] when a party left without counting down, so the latch will not
    /// open; [`LockError::Timeout`] (phase `Wait`) after [`Latch::wait_at_most`]; as
    /// [`Latch::state`].
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn wait(&self) -> Result<LatchState, LockError> {
        let mut poll = Poll::new(self.shared.wait_bound());
        loop {
            let state = self.state().await?;
            if state.is_open() {
                return Ok(state);
            }
            if state.is_broken() {
                return Err(LockError::Broken {
                    name: self.shared.name.to_string(),
                    lost: state.lost,
                });
            }
            poll.pause().await?;
        }
    }
}

/// A party of a [`Latch`]: a renewed lease of one of its places, until it counts down.
/// Dropped without counting down, it leaves, which breaks the latch.
#[derive(Debug)]
pub struct LatchParty {
    guard: Guard,
    latch: Latch,
}

impl LatchParty {
    /// Counts down: records the count-down (kept for the latch's `keep`), then gives the
    /// party's place up. A count-down made after the latch opened changes nothing.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the party's lease was lost before (it was counted out, and
    /// nothing is recorded); the backend's errors.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped before the record is written, the party leaves without
    /// counting down.
    pub async fn count_down(self) -> Result<(), LockError> {
        let shared = &self.latch.shared;
        if !self.guard.is_held() {
            return Err(LockError::Lost {
                name: shared.name.to_string(),
            });
        }
        // Done first, then the place: a reader never sees the party in neither.
        shared
            .write(CoordinationRecord::Done, shared.count, self.latch.keep)
            .await?;
        match self.guard.release().await {
            Ok(()) | Err(LockError::NotOwned { .. }) => Ok(()),
            Err(other) => Err(other),
        }
    }

    /// Resolves when the party's lease is lost (it is counted out): see [`Guard::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    /// The party's place: its lease, fencing token and validity.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// Stops renewing without leaving, as a crashed process would: the place is held until
    /// its lease runs out, then the party is counted out. For tests and hand-over (see
    /// [`Guard::leak`]).
    #[must_use]
    pub fn leak(self) -> Lease {
        self.guard.leak()
    }
}
