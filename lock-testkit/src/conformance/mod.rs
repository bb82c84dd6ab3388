//! One behaviour suite for the lock kinds (read-write, semaphore, fair, multi), run over every backend so backends cannot drift
//! apart.
//!
//! Each function takes a [`Backend`] (fresh [`Locker`]s on one shared store, and the times the
//! checks use) and a name prefix unique to the run, exercises one rule of the kinds that
//! `lock_core` documents, and panics with a message saying which rule broke. Every wait in
//! them is bounded by [`Backend::patience`].
//!
//! Every participant of a check (a reader, a writer, a permit holder) takes its own locker
//! from [`Backend::locker`], as separate processes would: a locker's local waiting line would
//! otherwise decide who goes first before the backend does, and the suite is about the
//! backend's rules.
//!
//! ```no_run
//! # async fn run() {
//! use std::sync::{Arc, Mutex, PoisonError};
//! use lock_core::{Locker, MemoryLock};
//! use lock_testkit::conformance::{self, Backend};
//!
//! let store = Arc::new(MemoryLock::new());
//! let backend = Backend::new(move || Locker::new(Arc::clone(&store)));
//! conformance::read_write::readers_share(&backend, "t1").await;
//! conformance::semaphore::k_permits_at_once(&backend, "t2").await;
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lock_core::Locker;

pub mod fair;
pub mod multi;
pub mod read_write;
pub mod semaphore;

/// A store under test: a factory of fresh [`Locker`]s that all reach the same store, and the
/// times the suite's checks use on it.
#[derive(Clone)]
pub struct Backend {
    lockers: Arc<dyn Fn() -> Locker + Send + Sync>,
    /// Every locker handed out, kept alive as long as the backend: a locker's renewal task
    /// ends with it, and a check's guards must be renewed however it drops its lockers.
    made: Arc<Mutex<Vec<Locker>>>,
    /// A TTL short enough to wait out in a test; leases that must expire get it. Default
    /// 500 ms.
    pub short_ttl: Duration,
    /// How long a check lets a waiter settle into its wait (its first busy attempt answered,
    /// a writer's waiting record written) before it looks at what the waiter did. Default
    /// 200 ms.
    pub settle: Duration,
    /// The generous bound on every wait that must end (liveness, never speed). Default 10 s.
    pub patience: Duration,
}

impl Backend {
    /// A backend whose lockers come from `lockers`, with the default times (fit for a real
    /// server on loopback, and for a paused tokio clock).
    pub fn new(lockers: impl Fn() -> Locker + Send + Sync + 'static) -> Self {
        Self {
            lockers: Arc::new(lockers),
            made: Arc::default(),
            short_ttl: Duration::from_millis(500),
            settle: Duration::from_millis(200),
            patience: Duration::from_secs(10),
        }
    }

    /// A fresh locker on the store (its own waiting lines, reentrancy records and renewal
    /// task, like another process's). It lives as long as this backend (a clone is kept), so
    /// guards it grants are renewed even after the caller dropped it.
    #[must_use]
    pub fn locker(&self) -> Locker {
        let locker = (self.lockers)();
        self.made
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(locker.clone());
        locker
    }

    /// Awaits `future` for at most [`Backend::patience`], panicking with `what` past it.
    pub async fn within<T>(&self, what: &str, future: impl Future<Output = T>) -> T {
        match tokio::time::timeout(self.patience, future).await {
            Ok(out) => out,
            Err(_) => panic!("{what}: not done within {:?}", self.patience),
        }
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("short_ttl", &self.short_ttl)
            .field("settle", &self.settle)
            .field("patience", &self.patience)
            .finish_non_exhaustive()
    }
}

/// The name of one check's lock: the run's prefix, then the check's own part.
fn name(prefix: &str, check: &str) -> String {
    format!("{prefix}:{check}")
}

/// Polls `future` `polls` times, sleeping `pause` between polls so its I/O progresses, then
/// drops it. Returns whether it had completed (its output is dropped too: a guard then
/// releases in the background).
async fn poll_then_drop<F: Future>(future: F, polls: usize, pause: Duration) -> bool {
    let mut future = std::pin::pin!(future);
    for _ in 0..polls {
        if futures::poll!(future.as_mut()).is_ready() {
            return true;
        }
        tokio::time::sleep(pause).await;
    }
    false
}
