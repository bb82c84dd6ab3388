//! What a `MemoryLock` holds, under its one mutex, and the fencing counter beside it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

use crate::Token;

/// The fencing counter of one `MemoryLock`: every grant of a mutex or a write takes the next.
#[derive(Debug, Default)]
pub(super) struct Fence(AtomicU64);

impl Fence {
    /// The next fencing token.
    pub(super) fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The last fencing token given (0 before the first).
    pub(super) fn last(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Everything the store holds, under one mutex.
#[derive(Debug, Default)]
pub(super) struct Store {
    pub(super) locks: HashMap<String, Entry>,
    pub(super) rw: HashMap<String, ReadWrite>,
    pub(super) semaphores: HashMap<String, Semaphore>,
    /// The fair waiters of each name, in arrival order, with when each entry lapses.
    pub(super) fair: HashMap<String, Vec<(Token, Instant)>>,
    /// The note of each mutex's grant ([`Lock::annotate`]), with the token it belongs to: a
    /// note whose token is not the holder's is stale and never shown.
    pub(super) notes: HashMap<String, (Token, Arc<[u8]>)>,
    /// Entries after the last sweep of expired ones; the next sweep runs at twice that.
    pub(super) swept_at: usize,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) token: Token,
    pub(super) expires: Instant,
    /// The fencing token of this grant, for [`Lock::describe_holder`].
    pub(super) fence: u64,
    /// When it was granted (wall clock), for inspection's "held since".
    pub(super) since: std::time::SystemTime,
}

/// One read-write lock: its writer, its readers, and the writers waiting (writer preference).
#[derive(Debug, Default)]
pub(super) struct ReadWrite {
    pub(super) writer: Option<Entry>,
    pub(super) readers: HashMap<Token, Instant>,
    pub(super) waiting_writers: HashMap<Token, Instant>,
}

/// One semaphore: its permit count and every holder's permits and expiry.
#[derive(Debug, Default)]
pub(super) struct Semaphore {
    pub(super) max: u32,
    pub(super) holders: HashMap<Token, (u32, Instant)>,
}

impl ReadWrite {
    pub(super) fn prune(&mut self, now: Instant) {
        if self.writer.is_some_and(|w| w.expires <= now) {
            self.writer = None;
        }
        self.readers.retain(|_, expires| *expires > now);
        self.waiting_writers.retain(|_, expires| *expires > now);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty() && self.waiting_writers.is_empty()
    }
}

impl Semaphore {
    pub(super) fn prune(&mut self, now: Instant) {
        self.holders.retain(|_, (_, expires)| *expires > now);
    }

    pub(super) fn in_use(&self) -> u32 {
        self.holders.values().map(|(permits, _)| *permits).sum()
    }
}

impl Store {
    /// The live entry for `name`, dropping it if it has expired.
    pub(super) fn live(&mut self, name: &str, now: Instant) -> Option<&mut Entry> {
        if self.locks.get(name).is_some_and(|e| e.expires <= now) {
            self.locks.remove(name);
        }
        self.locks.get_mut(name)
    }

    /// Drops expired entries of every kind once the maps have doubled since the last sweep, so
    /// names never asked for again do not pile up.
    pub(super) fn sweep(&mut self, now: Instant) {
        let size = self.locks.len() + self.rw.len() + self.semaphores.len() + self.fair.len();
        if size < self.swept_at.saturating_mul(2).max(1024) {
            return;
        }
        self.locks.retain(|_, e| e.expires > now);
        let locks = &self.locks;
        self.notes
            .retain(|name, (token, _)| locks.get(name).is_some_and(|e| e.token == *token));
        self.rw.retain(|_, rw| {
            rw.prune(now);
            !rw.is_empty()
        });
        self.semaphores.retain(|_, s| {
            s.prune(now);
            !s.holders.is_empty()
        });
        self.fair.retain(|_, queue| {
            queue.retain(|(_, lapses)| *lapses > now);
            !queue.is_empty()
        });
        self.swept_at = self.locks.len() + self.rw.len() + self.semaphores.len() + self.fair.len();
    }
}
