//! An in-process backend with the same semantics as the Redis one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::{Attempt, Handover, Lease, Lock, LockError, Token, lease::valid_until};

/// An in-process lock store with the semantics of the Redis backend: a lock expires at the end
/// of its TTL, only the holder's token extends or releases it, and every grant gets a fencing
/// token greater than all before it.
///
/// For unit tests (yours and ours) and for single-process programs. Time is tokio's clock, so
/// `tokio::time::pause()` and `advance()` drive expiry in tests. Fencing tokens come from one
/// counter per `MemoryLock`, so they increase across all names (and so, strictly, per name).
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
    held: Mutex<Held>,
    fence: AtomicU64,
}

#[derive(Debug, Default)]
struct Held {
    locks: HashMap<String, Entry>,
    /// Map size after the last sweep of expired entries; the next sweep runs at twice that.
    swept_at: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    token: Token,
    expires: Instant,
}

impl MemoryLock {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// How many locks are held (not expired) right now.
    #[must_use]
    pub fn held_count(&self) -> usize {
        let now = Instant::now();
        self.state()
            .locks
            .values()
            .filter(|e| e.expires > now)
            .count()
    }

    fn state(&self) -> MutexGuard<'_, Held> {
        // No code panics while holding the mutex, but never turn poison into a panic here.
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live entry for `name`, dropping it if it has expired.
    fn live<'a>(held: &'a mut Held, name: &str, now: Instant) -> Option<&'a mut Entry> {
        if held.locks.get(name).is_some_and(|e| e.expires <= now) {
            held.locks.remove(name);
        }
        held.locks.get_mut(name)
    }
}

#[async_trait]
impl Lock for MemoryLock {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let now = Instant::now();
        let mut held = self.state();
        if let Some(entry) = Self::live(&mut held, name, now) {
            return Ok(Attempt::Busy {
                holder_ttl: Some(entry.expires - now),
                // Every holder here is a distlock holder: a backend that wraps this one and
                // offers `watch` announces all of their releases.
                announces: true,
            });
        }
        if held.locks.len() >= held.swept_at.saturating_mul(2).max(1024) {
            held.locks.retain(|_, e| e.expires > now);
            held.swept_at = held.locks.len();
        }
        let expires = valid_until(now, ttl);
        held.locks.insert(name.to_owned(), Entry { token, expires });
        let fencing_token = self.fence.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(Attempt::Acquired(Lease::new(
            name,
            token,
            fencing_token,
            expires,
        )))
    }

    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let now = Instant::now();
        let mut held = self.state();
        Ok(match Self::live(&mut held, lease.name(), now) {
            Some(entry) if entry.token == *lease.token() => {
                entry.expires = valid_until(now, ttl);
                Some(entry.expires)
            }
            _ => None,
        })
    }

    async fn hand_over(
        &self,
        lease: &Lease,
        to: Token,
        ttl: Duration,
    ) -> Result<Handover, LockError> {
        let now = Instant::now();
        let mut held = self.state();
        Ok(match Self::live(&mut held, lease.name(), now) {
            Some(entry) if entry.token == *lease.token() => {
                entry.token = to;
                entry.expires = valid_until(now, ttl);
                let fencing_token = self.fence.fetch_add(1, Ordering::Relaxed) + 1;
                Handover::Handed(Lease::new(lease.name(), to, fencing_token, entry.expires))
            }
            _ => Handover::NotOwned,
        })
    }

    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut held = self.state();
        let ours =
            Self::live(&mut held, lease.name(), now).is_some_and(|e| e.token == *lease.token());
        if ours {
            held.locks.remove(lease.name());
        }
        Ok(ours)
    }
}
