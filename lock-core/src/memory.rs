//! An in-process backend with the same semantics as the Redis one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::backend::Holder;
use crate::{
    Attempt, Handover, Kind, Lease, Lock, LockError, Token, fair_entry_ttl, lease::valid_until,
};

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
    fence: AtomicU64,
}

/// Everything the store holds, under one mutex.
#[derive(Debug, Default)]
struct Store {
    locks: HashMap<String, Entry>,
    rw: HashMap<String, ReadWrite>,
    semaphores: HashMap<String, Semaphore>,
    /// The fair waiters of each name, in arrival order, with when each entry lapses.
    fair: HashMap<String, Vec<(Token, Instant)>>,
    /// The note of each mutex's grant ([`Lock::annotate`]), with the token it belongs to: a
    /// note whose token is not the holder's is stale and never shown.
    notes: HashMap<String, (Token, Arc<[u8]>)>,
    /// Entries after the last sweep of expired ones; the next sweep runs at twice that.
    swept_at: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    token: Token,
    expires: Instant,
    /// The fencing token of this grant, for [`Lock::describe_holder`].
    fence: u64,
}

/// One read-write lock: its writer, its readers, and the writers waiting (writer preference).
#[derive(Debug, Default)]
struct ReadWrite {
    writer: Option<Entry>,
    readers: HashMap<Token, Instant>,
    waiting_writers: HashMap<Token, Instant>,
}

/// One semaphore: its permit count and every holder's permits and expiry.
#[derive(Debug, Default)]
struct Semaphore {
    max: u32,
    holders: HashMap<Token, (u32, Instant)>,
}

impl ReadWrite {
    fn prune(&mut self, now: Instant) {
        if self.writer.is_some_and(|w| w.expires <= now) {
            self.writer = None;
        }
        self.readers.retain(|_, expires| *expires > now);
        self.waiting_writers.retain(|_, expires| *expires > now);
    }

    fn is_empty(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty() && self.waiting_writers.is_empty()
    }
}

impl Semaphore {
    fn prune(&mut self, now: Instant) {
        self.holders.retain(|_, (_, expires)| *expires > now);
    }

    fn in_use(&self) -> u32 {
        self.holders.values().map(|(permits, _)| *permits).sum()
    }
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

    fn state(&self) -> MutexGuard<'_, Store> {
        // No code panics while holding the mutex, but never turn poison into a panic here.
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn next_fence(&self) -> u64 {
        self.fence.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The live entry for `name`, dropping it if it has expired.
    fn live<'a>(store: &'a mut Store, name: &str, now: Instant) -> Option<&'a mut Entry> {
        if store.locks.get(name).is_some_and(|e| e.expires <= now) {
            store.locks.remove(name);
        }
        store.locks.get_mut(name)
    }

    fn try_mutex(&self, store: &mut Store, name: &str, token: Token, ttl: Duration) -> Attempt {
        let now = Instant::now();
        if let Some(entry) = Self::live(store, name, now) {
            return Attempt::Busy {
                holder_ttl: Some(entry.expires - now),
                // Every holder here is a distlock holder: a backend that wraps this one and
                // offers `watch` announces all of their releases.
                announces: true,
            };
        }
        Attempt::Acquired(self.grant_mutex(store, name, token, ttl, now))
    }

    /// Makes `token` the holder of the mutex `name` from `now` for `ttl`, with the next fencing
    /// token: the grant of a plain and of a fair request alike.
    fn grant_mutex(
        &self,
        store: &mut Store,
        name: &str,
        token: Token,
        ttl: Duration,
        now: Instant,
    ) -> Lease {
        let expires = valid_until(now, ttl);
        let fence = self.next_fence();
        store.locks.insert(
            name.to_owned(),
            Entry {
                token,
                expires,
                fence,
            },
        );
        Lease::new(name, token, fence, expires)
    }

    /// A reader's share or the write lock, by `kind`, with writer preference as it says.
    fn try_rw(
        &self,
        store: &mut Store,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Attempt {
        let (reading, writer_preference) = match kind {
            Kind::Read { writer_preference } => (true, writer_preference),
            Kind::Write { writer_preference } => (false, writer_preference),
            _ => unreachable!("called for read-write kinds only"),
        };
        let now = Instant::now();
        let rw = store.rw.entry(name.to_owned()).or_default();
        rw.prune(now);
        // Until when the holders that keep this request out may stay.
        let busy_until = match rw.writer {
            Some(writer) => Some(writer.expires),
            None if reading && writer_preference => rw.waiting_writers.values().max().copied(),
            None if reading => None,
            None => rw.readers.values().max().copied(),
        };
        if let Some(until) = busy_until {
            if !reading && writer_preference {
                rw.waiting_writers.insert(token, valid_until(now, ttl));
            }
            return Attempt::Busy {
                holder_ttl: Some(until - now),
                announces: true,
            };
        }
        let expires = valid_until(now, ttl);
        let fencing_token = if reading {
            rw.readers.insert(token, expires);
            // The last write's token: no write granted so far has a greater one, every later
            // write has a greater one.
            self.fence.load(Ordering::Relaxed)
        } else {
            rw.waiting_writers.remove(&token);
            let fence = self.next_fence();
            rw.writer = Some(Entry {
                token,
                expires,
                fence,
            });
            fence
        };
        Attempt::Acquired(Lease::new(name, token, fencing_token, expires).with_kind(kind))
    }

    /// The mutex of `name`, for the head of its queue of fair waiters only.
    fn try_fair(
        &self,
        store: &mut Store,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Attempt {
        let now = Instant::now();
        let holder = Self::live(store, name, now).map(|entry| entry.expires);
        let queue = store.fair.entry(name.to_owned()).or_default();
        queue.retain(|(_, lapses)| *lapses > now);
        let place = queue.iter().position(|(waiter, _)| *waiter == token);
        let first = place.map_or(queue.is_empty(), |place| place == 0);
        if let (true, None) = (first, holder) {
            if place.is_some() {
                queue.remove(0);
            }
            if queue.is_empty() {
                store.fair.remove(name);
            }
            let lease = self.grant_mutex(store, name, token, ttl, now);
            return Attempt::Acquired(lease.with_kind(kind));
        }
        // Until the holder's expiry, or the lapse of the entry ahead of us.
        let busy_until = holder.or_else(|| queue.first().map(|(_, lapses)| *lapses));
        if kind == (Kind::Fair { queued: true }) {
            let lapses = valid_until(now, fair_entry_ttl(ttl));
            match place {
                Some(place) => queue[place].1 = lapses,
                None => queue.push((token, lapses)),
            }
        } else if queue.is_empty() {
            store.fair.remove(name);
        }
        Attempt::Busy {
            holder_ttl: busy_until.map(|until| until - now),
            announces: true,
        }
    }

    fn try_permits(
        store: &mut Store,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let Kind::Semaphore { permits, max } = kind else {
            unreachable!("called for semaphores only");
        };
        let now = Instant::now();
        let semaphore = store.semaphores.entry(name.to_owned()).or_default();
        semaphore.prune(now);
        if semaphore.holders.is_empty() {
            semaphore.max = max;
        } else if semaphore.max != max {
            return Err(LockError::PermitsMismatch {
                name: name.to_owned(),
                max,
                held_max: semaphore.max,
            });
        }
        if semaphore.in_use().saturating_add(permits) > max {
            return Ok(Attempt::Busy {
                // The first permits free up when the soonest holder expires, at the latest.
                holder_ttl: semaphore.holders.values().map(|(_, at)| *at - now).min(),
                announces: true,
            });
        }
        let expires = valid_until(now, ttl);
        semaphore.holders.insert(token, (permits, expires));
        Ok(Attempt::Acquired(
            Lease::new(name, token, 0, expires).with_kind(kind),
        ))
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
        Self::sweep(&mut store, Instant::now());
        match kind {
            Kind::Mutex => Ok(self.try_mutex(&mut store, name, token, ttl)),
            Kind::Read { .. } | Kind::Write { .. } => {
                Ok(self.try_rw(&mut store, name, kind, token, ttl))
            }
            Kind::Semaphore { .. } => Self::try_permits(&mut store, name, kind, token, ttl),
            Kind::Fair { .. } => Ok(self.try_fair(&mut store, name, kind, token, ttl)),
        }
    }

    /// Drops expired entries of every kind once the maps have doubled since the last sweep, so
    /// names never asked for again do not pile up.
    fn sweep(store: &mut Store, now: Instant) {
        let size = store.locks.len() + store.rw.len() + store.semaphores.len() + store.fair.len();
        if size < store.swept_at.saturating_mul(2).max(1024) {
            return;
        }
        store.locks.retain(|_, e| e.expires > now);
        let locks = &store.locks;
        store
            .notes
            .retain(|name, (token, _)| locks.get(name).is_some_and(|e| e.token == *token));
        store.rw.retain(|_, rw| {
            rw.prune(now);
            !rw.is_empty()
        });
        store.semaphores.retain(|_, s| {
            s.prune(now);
            !s.holders.is_empty()
        });
        store.fair.retain(|_, queue| {
            queue.retain(|(_, lapses)| *lapses > now);
            !queue.is_empty()
        });
        store.swept_at =
            store.locks.len() + store.rw.len() + store.semaphores.len() + store.fair.len();
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
        let Some(entry) = Self::live(&mut store, name, now).copied() else {
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
        let ours = Self::live(&mut store, lease.name(), now).is_some_and(|e| {
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

    async fn try_acquire_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.attempt(name, kind, token, ttl)
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
            _ => Self::live(&mut store, name, now)
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
        Ok(match Self::live(&mut store, lease.name(), now) {
            Some(entry) if entry.token == *lease.token() => {
                entry.token = to;
                entry.expires = valid_until(now, ttl);
                entry.fence = self.next_fence();
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
                let ours = Self::live(&mut store, name, now).is_some_and(|e| e.token == *token);
                if ours {
                    store.locks.remove(name);
                    store.notes.remove(name);
                }
                ours
            }
        })
    }
}
