//! One behaviour suite for the exclusive lock and the lock kinds (mutex, read-write, semaphore,
//! fair, multi), run over every backend so backends cannot drift apart.
//!
//! [`mutex`] states the contract of the exclusive lock once: exclusion among tasks of several
//! lockers, expiry, not-ours answers to a stale release and extend that leave the new holder
//! intact, fencing tokens, hand-over within one locker, wake-ups across lockers, cancellation,
//! renewal and loss, bad input. The other modules hold the kinds' rules.
//!
//! Where a backend keeps less than the full contract, it says so in one place, its
//! [`Backend`]'s capabilities ([`Backend::announces_releases`], [`Backend::fencing`], each
//! documented with the reason), and the checks assert the weaker property it promises instead
//! of skipping. The defaults claim the full contract, so a backend that differs fails until it
//! says so.
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
//!
//! // MemoryLock offers no `watch`: its waiters on other lockers poll.
//! let mut backend = backend;
//! backend.announces_releases = false;
//! conformance::mutex::wakeups_across_lockers(&backend, "t3").await;
//! conformance::mutex::fencing_increases(&backend, "t4").await;
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lock_core::Locker;

pub mod fair;
pub mod multi;
pub mod mutex;
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
    /// Whether a release on one locker wakes a waiter on another locker through the
    /// backend's announcement ([`Lock::watch`](lock_core::Lock::watch) answers `Some`).
    /// Default `true`, the full contract: a backend that cannot announce says so here, and
    /// [`mutex::wakeups_across_lockers`] then checks only that its waiters still get in by
    /// polling. `false` for `MemoryLock` (it offers no `watch`: only waiters of the releasing
    /// locker are woken at once) and for a Redlock over nodes that announce nothing.
    pub announces_releases: bool,
    /// What the backend's fencing tokens promise; see [`Fencing`]. Default
    /// [`Fencing::Strict`], the full contract.
    pub fencing: Fencing,
}

/// What a backend's fencing tokens promise about successive grants of one name: the one place
/// where the suite's fencing checks learn how a backend differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fencing {
    /// Every grant of a name carries a larger token than every earlier grant of it, through
    /// release, expiry and hand-over: one store numbers the grants (`MemoryLock`'s counter,
    /// `RedisLock`'s `max(clock in µs, counter + 1)`, Postgres' per-name column).
    Strict,
    /// A Redlock over nodes whose tokens share one scale (`RedisLock` nodes: wall-clock
    /// microseconds). Its token is the largest the nodes granted by the time the quorum
    /// decided, and two quorums share a node, so a grant's token is larger than an earlier
    /// grant's **whenever no node's tokens run ahead of another node's clock by more than the
    /// earlier holder held the lock** (lock-redlock's README, "Fencing tokens"). The checks
    /// hold every grant at least this long before ending it (more than the nodes' clocks
    /// differ: they share one host here), then assert strict increase.
    AfterHolding(Duration),
    /// A Redlock over nodes whose tokens are plain counters (`MemoryLock` nodes): a node whose
    /// counter ran ahead makes one grant's token larger than the next one's, so grants are
    /// **not** ordered (lock-redlock's README, "Fencing tokens"; its
    /// `tests/fencing_memory.rs` shows it). The checks assert only that every grant carries a
    /// token (non-zero).
    Unordered,
    /// The backend issues no fencing tokens: every grant carries 0
    /// (`PostgresAdvisoryLock`: a session advisory lock has no counter beside it; its README
    /// says to use the lease-table mode where a store checks tokens). The checks assert that
    /// every token is 0, so a token that appears is noticed too.
    None,
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
            announces_releases: true,
            fencing: Fencing::Strict,
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
            .field("announces_releases", &self.announces_releases)
            .field("fencing", &self.fencing)
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

/// Writes one test per check of [`mutex`]: an `async fn` named after the check, under the
/// test attribute given (`#[tokio::test(...)]`), whose body evaluates `setup` — an expression
/// giving `(keep, backend)`: `keep` (a server, a set of nodes, `()`) lives until the check has
/// run — and runs the check over `backend`. Every backend's runner uses this one list, so a
/// check added here runs everywhere.
///
/// ```ignore
/// mod memory {
///     lock_testkit::mutex_conformance_tests!(#[tokio::test(start_paused = true)] ((), crate::memory()));
/// }
/// ```
#[macro_export]
macro_rules! mutex_conformance_tests {
    (#[$attr:meta] $setup:expr) => {
        $crate::__conformance_tests!(mutex; #[$attr] $setup;
            exclusion_among_tasks,
            expiry_frees_the_name,
            stale_release_is_not_ours,
            stale_extend_is_not_ours,
            fencing_increases,
            hand_over_within_one_locker,
            wakeups_across_lockers,
            cancelled_acquire_leaves_nothing,
            renewal_outlives_the_lease,
            fixed_ttl_is_lost,
            renewal_notices_loss,
            bad_input_sends_nothing,
        );
    };
}

/// The body of [`mutex_conformance_tests!`]: one test per check of `module`.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($module:ident; #[$attr:meta] $setup:expr; $($check:ident),+ $(,)?) => {
        $(
            #[$attr]
            async fn $check() {
                let (_keep, backend) = $setup;
                $crate::conformance::$module::$check(&backend, stringify!($check)).await;
            }
        )+
    };
}
