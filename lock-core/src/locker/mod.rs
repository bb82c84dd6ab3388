//! The policy every backend shares: validation, bounded waiting, renewal, metrics, tracing,
//! cleanup on cancellation.
//!
//! The rooms, from the top down (each imports only those below it):
//! - here, the `Locker`'s entry points: the requests it starts, and its direct operations;
//! - `builder`: [`LockerBuilder`];
//! - `request`: [`LockRequest`], one name; `multi`: [`MultiRequest`] and [`MultiGuard`];
//! - `line`: the wait for one name, in this process's line for it;
//! - `handle`: the `Locker` type and its shared state; one attempt, one grant, one nested guard;
//! - `options`: the options both request types hold; `pace`: a wait's deadline, error budget
//!   and delay, and the span and outcome metrics of an acquire.

mod adopt;
mod builder;
mod handle;
mod line;
mod multi;
mod options;
mod pace;
mod request;
mod revoke;
mod stop;
mod visible;

use std::sync::Arc;

pub use adopt::AdoptRequest;
pub use builder::LockerBuilder;
pub use handle::Locker;
pub use multi::{MAX_MULTI, MultiGuard, MultiRequest};
pub use options::{DEFAULT_LEASE, DEFAULT_RETRY_ERRORS_FOR, DEFAULT_WAIT, default_stop_margin};
pub use request::LockRequest;
pub use visible::{VISIBLE_AFTER, waiter_record_of};

use crate::backend::Lock;
use crate::{Kind, Lease, LockError};

impl Locker {
    /// A locker over `lock` with the defaults: [`DEFAULT_LEASE`], [`DEFAULT_WAIT`],
    /// [`Backoff::default`](crate::Backoff::default), no cap on hold time.
    pub fn new<L: Lock + 'static>(lock: L) -> Self {
        Self::builder(lock).build()
    }

    /// A locker over a shared backend.
    pub fn from_arc(lock: Arc<dyn Lock>) -> Self {
        LockerBuilder::from_arc(lock).build()
    }

    /// Starts configuring a locker over `lock`.
    pub fn builder<L: Lock + 'static>(lock: L) -> LockerBuilder {
        LockerBuilder::from_arc(Arc::new(lock))
    }

    /// Starts a request for the exclusive lock `name` (a mutex: one holder at a time);
    /// nothing is sent until it is awaited.
    ///
    /// `locker.lock(name).await` is `locker.lock(name).acquire().await`.
    pub fn lock(&self, name: impl Into<Arc<str>>) -> LockRequest {
        self.request(name.into(), Kind::Mutex)
    }

    /// Starts a request for a read share of the read-write lock `name`: any number of readers
    /// hold it at once, never beside a writer. Each reader holds a lease of its own (its own
    /// token and expiry, renewed on its own), so a crashed reader frees its share at the end
    /// of its lease and renewing one reader never moves another's expiry.
    ///
    /// **Writer preference** (on by default): once a writer waits for the name, readers
    /// arriving after it queue behind it, so a stream of overlapping readers cannot starve
    /// writers. Turn it off with [`LockRequest::writer_preference`]`(false)` on both sides.
    ///
    /// The guard's [`fencing_token`](crate::Guard::fencing_token) is the token of the last write
    /// granted before this read: a store can check that no newer write happened since.
    ///
    /// **Reentrancy**: a task that holds a read share or the write lock of `name` gets a
    /// nested guard. The read-write lock `name` is a different lock from the mutex `name`.
    ///
    /// Not every backend offers read-write locks: the others answer
    /// [`LockError::Unsupported`].
    pub fn read(&self, name: impl Into<Arc<str>>) -> LockRequest {
        self.request(
            name.into(),
            Kind::Read {
                writer_preference: true,
            },
        )
    }

    /// Starts a request for the write lock of the read-write lock `name`: alone, with no
    /// reader and no other writer. Its guard carries a fencing token like a mutex's.
    ///
    /// **Reentrancy**: a task that holds the write lock gets a nested guard for `write` and
    /// for [`read`](Locker::read) (reading under one's own write lock); a task that holds only
    /// a read share and asks to write gets [`LockError::UpgradeRefused`] at once — waiting
    /// would deadlock with itself (or with another reader upgrading). See
    /// [`read`](Locker::read) for writer preference.
    pub fn write(&self, name: impl Into<Arc<str>>) -> LockRequest {
        self.request(
            name.into(),
            Kind::Write {
                writer_preference: true,
            },
        )
    }

    /// Starts a request for the exclusive lock `name`, granted **in the order the processes
    /// asked**: a fair lock. The waiters queue in the backend; each waiter's entry lapses
    /// [`fair_entry_ttl`](crate::fair_entry_ttl) after its last attempt, and a waiting
    /// request tries again at least every half of that, so a process that dies or gives up
    /// while queued holds the others back for a few seconds at most (a request that is
    /// cancelled or times out withdraws its entry at once). Only the head of the queue is told
    /// when the lock is free.
    ///
    /// Within one process, waiters queue first-in first-out as for [`lock`](Locker::lock) and
    /// only the first takes a place in the backend's queue, so processes take turns and tasks
    /// within a process take turns. There is no local handoff: a release goes to the queue.
    ///
    /// The fair lock `name` **is** the mutex `name` (the same key): the two exclude each other
    /// and a task holding one gets a nested guard for the other, but a plain
    /// [`lock`](Locker::lock) request does not queue and may get in ahead of fair waiters.
    ///
    /// Not every backend offers fair locks: the others answer [`LockError::Unsupported`].
    pub fn fair(&self, name: impl Into<Arc<str>>) -> LockRequest {
        self.request(name.into(), Kind::Fair { queued: true })
    }

    /// Starts a request for one permit of the counting semaphore `name`, which has `max`
    /// permits; [`LockRequest::permits`] takes several at once (all or none). Each grant is a
    /// lease with its own token and expiry, renewed like a lock's, so a holder that crashes
    /// returns its permits at the end of its lease. A waiter for `k` permits is granted them
    /// when `k` are free.
    ///
    /// Every holder of one name must give the same `max`: a request with another count while
    /// permits are held fails with [`LockError::PermitsMismatch`] (a semaphore nobody holds
    /// takes the count of its next holder). Permits are not reentrant: a task that asks again
    /// takes more permits. [`LockRequest::available`] tells how many are free.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_core::LockError> {
    /// use lock_core::{Locker, MemoryLock};
    ///
    /// let locker = Locker::new(MemoryLock::new());
    /// let two = locker.semaphore("pdf-workers", 8).permits(2).await?;
    /// assert_eq!(locker.semaphore("pdf-workers", 8).available().await?, 6);
    /// two.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<Arc<str>>, max: u32) -> LockRequest {
        self.request(name.into(), Kind::Semaphore { permits: 1, max })
    }

    /// Starts a request for the mutexes `names`, all or nothing: one guard over every name,
    /// each with its own lease and fencing token, renewed together; losing any one lease is
    /// losing the guard. Repeated names count once. See [`MultiRequest::acquire`] for how it
    /// waits and why overlapping multi-locks never deadlock.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_core::LockError> {
    /// use lock_core::{Locker, MemoryLock};
    ///
    /// let locker = Locker::new(MemoryLock::new());
    /// // Move money between two accounts: both locked, or neither.
    /// let both = locker.lock_all(["account:7", "account:3"]).await?;
    /// assert_eq!(both.names().collect::<Vec<_>>(), ["account:3", "account:7"]);
    /// assert!(locker.lock("account:7").try_acquire().await?.is_none());
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<N: Into<Arc<str>>>(&self, names: impl IntoIterator<Item = N>) -> MultiRequest {
        let names: Vec<Arc<str>> = names.into_iter().map(Into::into).collect();
        MultiRequest::new(self, names)
    }

    fn request(&self, name: Arc<str>, kind: Kind) -> LockRequest {
        LockRequest::new(self, name, kind)
    }

    /// Releases a lease obtained from [`Guard::leak`](crate::Guard::leak), if it is still ours.
    ///
    /// # Errors
    /// [`LockError::NotOwned`] when the lease was no longer ours (nothing was changed); the
    /// backend's errors, as [`Lock::release`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the lease is held or released.
    pub async fn release(&self, lease: &Lease) -> Result<(), LockError> {
        if self.backend_lock().as_ref().release(lease).await? {
            Ok(())
        } else {
            Err(LockError::NotOwned {
                name: lease.name().to_owned(),
            })
        }
    }

    /// Checks that the backend answers (Redis: a connection and a `PING`), for start-up:
    /// a service can refuse to start, or report unready, instead of learning that the store
    /// is unreachable from its first lock request.
    ///
    /// # Errors
    /// The backend's: [`LockError::Timeout`] past its connect or command timeout,
    /// [`LockError::Backend`] when it refuses (connection refused, wrong password). See
    /// [`Lock::ping`].
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn ping(&self) -> Result<(), LockError> {
        self.backend_lock().as_ref().ping().await
    }
}
