//! The `MemoryLock` type and its one `impl Lock`, which dispatches on the kind.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::kinds::{fair, mutex, read_write, semaphore};
use super::store::{Fence, Store};
use crate::backend::Holder;
use crate::backend::{Attempt, Handover, Lock};
use crate::{Kind, Lease, LockError, Token, lease::valid_until};

/// An in-process lock store with the semantics of the Redis backend: a lock expires at the end
/// of its TTL, only the holder's token extends or releases it, and every grant gets a fencing
/// token greater than all before it. It offers every [`Kind`]: mutex, read-write lock (writer
/// preference, one lease per reader) and semaphore (one lease per holder of `k` permits).
///
/// For unit tests (yours and ours) and for single-process programs. Time is tokio's clock, so
/// `tokio::time::pause()` and `advance()` drive expiry in tests. Fencing tokens come from one
/// counter per `MemoryLock`, so they increase across all names (and so, strictly, per name); a
/// reader's fencing token is the counter's value at its grant, which no earlier write exceeds
/// and every later write does.
///
/// The mutex, the read-write lock and the semaphore of one name are separate locks, as on
/// Redis; the fair lock of a name is its mutex, taken in the order of a queue.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_core::LockError> {
/// use lock_core::{Locker, MemoryLock};
///
/// let locker = Locker::new(MemoryLock::new());
/// let first = locker.lock("job").acquire().await?;
/// assert!(locker.lock("job").try_acquire().await?.is_none()); // held
/// first.release().await?;
/// assert!(locker.lock("job").try_acquire().await?.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct MemoryLock {
    store: Mutex<Store>,
    fence: Fence,
}

impl MemoryLock {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// How many locks are held (not expired) right now: mutexes, writers, readers and
    /// semaphore holders, each lease counted once.
    #[must_use]
    pub fn held_count(&self) -> usize {
        let now = Instant::now();
        let state = self.state();
        let mutexes = state.locks.values().filter(|e| e.expires > now).count();
        let rw: usize = state
            .rw
            .values()
            .map(|rw| {
                usize::from(rw.writer.is_some_and(|w| w.expires > now))
                    + rw.readers.values().filter(|at| **at > now).count()
            })
            .sum();
        let permits: usize = state
            .semaphores
            .values()
            .map(|s| s.holders.values().filter(|(_, at)| *at > now).count())
            .sum();
        mutexes + rw + permits
    }

    pub(super) fn state(&self) -> MutexGuard<'_, Store> {
        // No code panics while holding the mutex, but never turn poison into a panic here.
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One attempt of any kind, under the store's lock (shared by `try_acquire` and
    /// `try_acquire_kind`, so neither boxes a future only to call the other).
    fn attempt(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let mut store = self.state();
        store.sweep(Instant::now());
        match kind {
            Kind::Mutex => Ok(mutex::try_acquire(
                &mut store,
                &self.fence,
                name,
                token,
                ttl,
            )),
            Kind::Read { .. } | Kind::Write { .. } => Ok(read_write::try_acquire(
                &mut store,
                &self.fence,
                name,
                kind,
                token,
                ttl,
            )),
            Kind::Semaphore { .. } => semaphore::try_acquire(&mut store, name, kind, token, ttl),
            Kind::Fair { .. } => Ok(fair::try_acquire(
                &mut store,
                &self.fence,
                name,
                kind,
                token,
                ttl,
            )),
        }
    }
}

#[async_trait]
impl Lock for MemoryLock {
    fn backend(&self) -> &'static str {
        "memory"
    }

    /// Every kind; the multi-lock one name after the other (each grant is atomic under the
    /// store's mutex, not the set); strict fencing tokens from one counter. No announcements:
    /// the store lives in one process, whose `Locker`s wake their own waiters, so waiters on
    /// another `Locker` over the same store poll.
    fn inspector(&self) -> Option<&dyn crate::backend::Inspect> {
        Some(self)
    }

    fn capabilities(&self) -> crate::backend::Capabilities {
        use crate::backend::{Capabilities, Fencing, MultiLock, TokenScale};
        Capabilities::MUTEX
            .with_read_write()
            .with_semaphore()
            .with_fair()
            .with_multi(MultiLock::InOrder)
            .with_fencing(Fencing::Strict(TokenScale::Counter))
            .with_announcements(false)
            .with_holders(true)
    }

    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        let now = Instant::now();
        let mut store = self.state();
        let Some(entry) = store.live(name, now).copied() else {
            return Ok(None);
        };
        let holder = Holder::new(entry.fence, Some(entry.expires - now));
        Ok(Some(match store.notes.get(name) {
            Some((token, note)) if *token == entry.token => holder.with_note(Arc::clone(note)),
            _ => holder,
        }))
    }

    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut store = self.state();
        let ours = store.live(lease.name(), now).is_some_and(|e| {
            e.token == *lease.token() && matches!(lease.kind(), Kind::Mutex | Kind::Fair { .. })
        });
        if ours {
            store
                .notes
                .insert(lease.name().to_owned(), (*lease.token(), Arc::from(note)));
        }
        Ok(ours)
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempt(name, Kind::Mutex, token, ttl)
    }

    async fn try_acquire_read(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempt(name, Kind::Read { writer_preference }, token, ttl)
    }

    async fn try_acquire_write(
        &self,
        name: &str,
        writer_preference: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempt(name, Kind::Write { writer_preference }, token, ttl)
    }

    async fn try_acquire_semaphore(
        &self,
        name: &str,
        permits: u32,
        max: u32,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempt(name, Kind::Semaphore { permits, max }, token, ttl)
    }

    async fn try_acquire_fair(
        &self,
        name: &str,
        queued: bool,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempt(name, Kind::Fair { queued }, token, ttl)
    }

    async fn permits_in_use(&self, name: &str) -> Result<u32, LockError> {
        let now = Instant::now();
        let mut store = self.state();
        Ok(store.semaphores.get_mut(name).map_or(0, |semaphore| {
            semaphore.prune(now);
            semaphore.in_use()
        }))
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let now = Instant::now();
        let expires = valid_until(now, ttl);
        let mut store = self.state();
        let name = lease.name();
        let token = lease.token();
        let extended = match lease.kind() {
            Kind::Read { .. } => store
                .rw
                .get_mut(name)
                .and_then(|rw| rw.readers.get_mut(token))
                .filter(|at| **at > now)
                .map(|at| *at = expires),
            Kind::Write { .. } => store
                .rw
                .get_mut(name)
                .and_then(|rw| rw.writer.as_mut())
                .filter(|w| w.token == *token && w.expires > now)
                .map(|w| w.expires = expires),
            Kind::Semaphore { .. } => store
                .semaphores
                .get_mut(name)
                .and_then(|s| s.holders.get_mut(token))
                .filter(|(_, at)| *at > now)
                .map(|(_, at)| *at = expires),
            _ => store
                .live(name, now)
                .filter(|e| e.token == *token)
                .map(|e| e.expires = expires),
        };
        Ok(extended.map(|()| expires))
    }

    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        if lease.kind() != Kind::Mutex {
            return Ok(Handover::Unsupported);
        }
        let now = Instant::now();
        let mut store = self.state();
        Ok(match store.live(lease.name(), now) {
            Some(entry) if entry.token == *lease.token() => {
                entry.token = to;
                entry.expires = valid_until(now, ttl);
                entry.fence = self.fence.next();
                let (expires, fence) = (entry.expires, entry.fence);
                Handover::Handed(Lease::new(lease.name(), to, fence, expires))
            }
            _ => Handover::NotOwned,
        })
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut store = self.state();
        let name = lease.name();
        let token = lease.token();
        Ok(match lease.kind() {
            Kind::Read { .. } | Kind::Write { .. } => {
                let Some(rw) = store.rw.get_mut(name) else {
                    return Ok(false);
                };
                rw.prune(now);
                // A write request that gave up withdraws its waiting record here.
                rw.waiting_writers.remove(token);
                let ours = match lease.kind() {
                    Kind::Read { .. } => rw.readers.remove(token).is_some(),
                    _ => rw.writer.take_if(|w| w.token == *token).is_some(),
                };
                if rw.is_empty() {
                    store.rw.remove(name);
                }
                ours
            }
            Kind::Semaphore { .. } => {
                let Some(semaphore) = store.semaphores.get_mut(name) else {
                    return Ok(false);
                };
                semaphore.prune(now);
                let ours = semaphore.holders.remove(token).is_some();
                if semaphore.holders.is_empty() {
                    store.semaphores.remove(name);
                }
                ours
            }
            kind => {
                if let Kind::Fair { .. } = kind
                    && let Some(queue) = store.fair.get_mut(name)
                {
                    // A fair request that gave up withdraws its entry here.
                    queue.retain(|(waiter, lapses)| waiter != token && *lapses > now);
                    if queue.is_empty() {
                        store.fair.remove(name);
                    }
                }
                let ours = store.live(name, now).is_some_and(|e| e.token == *token);
                if ours {
                    store.locks.remove(name);
                    store.notes.remove(name);
                }
                ours
            }
        })
    }
}
