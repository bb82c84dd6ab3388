//! One behaviour suite for the exclusive lock and the lock kinds (mutex, read-write, semaphore,
//! fair, multi), run over every backend so backends cannot drift apart.
//!
//! [`mutex`] states the contract of the exclusive lock once: exclusion among tasks of several
//! lockers, expiry, not-ours answers to a stale release and extend that leave the new holder
//! intact, fencing tokens, hand-over within one locker, wake-ups across lockers, cancellation,
//! renewal and loss, bad input. The other modules hold the kinds' rules.
//!
//! What a backend offers, it says in one place: its capability table,
//! [`Lock::capabilities`](lock_core::backend::Lock::capabilities), documented there with the
//! reason for anything less than the full contract. The suite reads it through
//! [`Backend::capabilities`]: the checks assert the weaker property a backend promises instead
//! of skipping ([`Backend::fencing`], [`Backend::announces_releases`]), and a kind the backend
//! does not offer is checked to be refused ([`refused`]), never left out.
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
//! A backend's runner is one [`conformance_tests!`](crate::conformance_tests) call, which
//! writes a test for every check of every module ([`Module::checks`]). By hand:
//!
//! ```no_run
//! # async fn run() {
//! use std::sync::Arc;
//! use lock_core::{Locker, MemoryLock};
//! use lock_testkit::conformance::{self, Backend};
//!
//! let store = Arc::new(MemoryLock::new());
//! let backend = Backend::new(move || Locker::new(Arc::clone(&store)));
//! conformance::read_write::readers_share(&backend, "t1").await;
//! conformance::semaphore::k_permits_at_once(&backend, "t2").await;
//! // MemoryLock declares no announcements: its waiters on other lockers poll, and the check
//! // asserts only that they still get in.
//! assert!(!backend.announces_releases());
//! conformance::mutex::wakeups_across_lockers(&backend, "t3").await;
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use std::net::SocketAddr;

use lock_core::backend::{self, Capabilities};
use lock_core::{Locker, LockerBuilder};

use crate::FaultProxy;

pub mod barrier;
mod checks;
pub mod election;
pub mod errors;
pub mod fair;
pub mod guarded;
pub mod inspect;
pub mod latch;
pub mod lock_delay;
mod lost_answer;
pub mod multi;
pub mod mutex;
mod queued;
pub mod read_write;
pub mod revocation;
mod run;
mod runners;
pub mod semaphore;
mod slow;
mod unsupported;

pub use checks::Module;
pub use guarded::GuardedWrites;
#[doc(hidden)]
pub use run::{CHECK_FILTER_ENV, CHECKS_AT_ONCE, Check, run_checks};
pub use runners::assert_listed;
pub use runners::{RUNNERS, Runner};
pub use slow::SlowLock;
pub use unsupported::refused;

/// A store under test: a factory of fresh [`Locker`]s that all reach the same store, and the
/// times the suite's checks use on it.
#[derive(Clone)]
pub struct Backend {
    lockers: Lockers,
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
    /// How long a check holds a grant before ending it when the backend's fencing is
    /// [`Fencing::AfterHolding`]: more than the nodes' clocks differ. Default 5 ms (the
    /// nodes of a test share one host's clock).
    pub hold: Duration,
    /// The capability table of the backend's lock, read once from the first locker.
    capabilities: Arc<OnceLock<Capabilities>>,
    /// Lockers on the same store whose requests and answers are late by the latency given
    /// ([`Backend::with_late_answers`]).
    late: Option<LateLockers>,
    /// The store's fence, for the `guarded` module ([`Backend::with_guarded_writes`]).
    guarded: Option<GuardedWrites>,
    /// Lockers of the same backend pointed at any address, for the `errors` module
    /// ([`Backend::with_address`]).
    reach: Option<Reach>,
    /// Lockers of the same backend on a store that lacks its schema or bucket
    /// ([`Backend::with_unprepared`]).
    unprepared: Option<Lockers>,
    /// Lockers of the same backend with credentials its store refuses
    /// ([`Backend::with_wrong_credentials`]).
    wrong_credentials: Option<Lockers>,
}

/// A factory of lockers of one backend, set up as the runner says.
type Lockers = Arc<dyn Fn() -> Locker + Send + Sync>;

/// A factory of lockers of one backend pointed at the address given.
type Reach = Arc<dyn Fn(SocketAddr) -> Locker + Send + Sync>;

/// A factory of lockers whose requests and answers are late by the latency given.
type LateLockers = Arc<dyn Fn(Duration) -> Locker + Send + Sync>;

/// What a backend's fencing tokens promise about successive grants of one name, as the suite's
/// fencing checks use it: the backend's declared [`backend::Fencing`] with the test's times
/// ([`Backend::fencing`]).
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
    /// hold every grant at least this long ([`Backend::hold`]) before ending it, then assert
    /// strict increase.
    AfterHolding(Duration),
    /// A Redlock over nodes whose tokens are plain counters (`MemoryLock` nodes): a node whose
    /// counter ran ahead makes one grant's token larger than the next one's, so grants are
    /// **not** ordered (lock-redlock's README, "Fencing tokens"; its
    /// `tests/it/fencing_memory.rs` shows it). The checks assert only that every grant carries a
    /// token (non-zero).
    Unordered,
    /// The backend issues no fencing tokens: every grant carries 0
    /// (`PostgresAdvisoryLock`: a session advisory lock has no counter beside it; its README
    /// says to use the lease-table mode where a store checks tokens; a `RedisLock` with
    /// `fencing(false)`). The checks assert that every token is 0, so a token that appears is
    /// noticed too.
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
            hold: Duration::from_millis(5),
            capabilities: Arc::default(),
            late: None,
            guarded: None,
            reach: None,
            unprepared: None,
            wrong_credentials: None,
        }
    }

    /// Gives the [`errors`] module a locker of this backend whose credentials its store
    /// refuses (a wrong password or secret), for a store that checks credentials.
    #[must_use]
    pub fn with_wrong_credentials(
        mut self,
        lockers: impl Fn() -> Locker + Send + Sync + 'static,
    ) -> Self {
        self.wrong_credentials = Some(Arc::new(lockers));
        self
    }

    /// A locker with refused credentials ([`Backend::with_wrong_credentials`]), `None` when
    /// the runner gave none.
    #[must_use]
    pub fn wrong_credentials_locker(&self) -> Option<Locker> {
        Some(self.keep((self.wrong_credentials.as_ref()?)()))
    }

    /// Gives the [`errors`] module a locker of this backend on a store that lacks what the
    /// backend needs before its first lock (a lease table never migrated, a bucket never
    /// made), for a store that needs such a thing.
    #[must_use]
    pub fn with_unprepared(mut self, lockers: impl Fn() -> Locker + Send + Sync + 'static) -> Self {
        self.unprepared = Some(Arc::new(lockers));
        self
    }

    /// A locker on an unprepared store ([`Backend::with_unprepared`]), `None` when the runner
    /// gave none (its store needs nothing made first).
    #[must_use]
    pub fn unprepared_locker(&self) -> Option<Locker> {
        Some(self.keep((self.unprepared.as_ref()?)()))
    }

    /// Gives the [`errors`] module a way to point this backend at any address: `at(addr)`
    /// makes a fresh locker of the same backend, with the runner's usual settings and short
    /// connect and command timeouts (a second or two), whose store is at `addr`. A backend
    /// with no network between it and its store (`MemoryLock`) gives none.
    #[must_use]
    pub fn with_address(
        mut self,
        at: impl Fn(SocketAddr) -> Locker + Send + Sync + 'static,
    ) -> Self {
        self.reach = Some(Arc::new(at));
        self
    }

    /// A locker of this backend pointed at `addr` ([`Backend::with_address`]), `None` when the
    /// runner gave no way to.
    #[must_use]
    pub fn locker_at(&self, addr: SocketAddr) -> Option<Locker> {
        Some(self.keep((self.reach.as_ref()?)(addr)))
    }

    /// Gives the [`guarded`] module the fence of the store this backend locks on: a backend
    /// whose capability table declares guarded writes must be given one, one that does not
    /// must not.
    #[must_use]
    pub fn with_guarded_writes(mut self, writes: GuardedWrites) -> Self {
        self.guarded = Some(writes);
        self
    }

    /// The store's fence the runner gave ([`Backend::with_guarded_writes`]).
    #[must_use]
    pub fn guarded_writes(&self) -> Option<&GuardedWrites> {
        self.guarded.as_ref()
    }

    /// Gives the backend a way to lose answers below it, which
    /// [`mutex::lost_answer_leaves_nothing`] needs (it fails without one): `lockers(latency)`
    /// makes a fresh locker on the same store whose requests reach the store `latency` late
    /// and whose answers come back `latency` late, so that a caller giving up in between
    /// leaves a grant the store applied and nobody received. Below the backend's own code: a
    /// proxy on its connections ([`Backend::with_late_answers_through`]), a wrapper of the
    /// store it writes to, [`SlowLock`] around a Redlock's nodes.
    #[must_use]
    pub fn with_late_answers(
        mut self,
        lockers: impl Fn(Duration) -> Locker + Send + Sync + 'static,
    ) -> Self {
        self.late = Some(Arc::new(lockers));
        self
    }

    /// [`Backend::with_late_answers`] through a [`FaultProxy`] in front of `upstream` (the
    /// store's address) with the latency asked for, one proxy per locker; `connect(addr)`
    /// makes a locker whose backend connects to the store at `addr` (the proxy's address). A
    /// proxy lives as long as the backend. Unless the runner gave one, `connect` is also the
    /// backend's way to any address ([`Backend::with_address`]).
    #[must_use]
    pub fn with_late_answers_through(
        self,
        upstream: SocketAddr,
        connect: impl Fn(SocketAddr) -> Locker + Send + Sync + 'static,
    ) -> Self {
        let proxies: Arc<Mutex<Vec<FaultProxy>>> = Arc::default();
        // The same lockers reach any address: the `errors` module's too.
        let connect = Arc::new(connect);
        let reach = Arc::clone(&connect);
        let mut this = self;
        if this.reach.is_none() {
            this.reach = Some(Arc::new(move |addr| reach(addr)));
        }
        this.with_late_answers(move |latency| {
            let proxy = FaultProxy::start(upstream).expect("start a fault proxy");
            proxy.set_latency(latency);
            let locker = connect(proxy.addr());
            proxies
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(proxy);
            locker
        })
    }

    /// [`Backend::with_late_answers`] with [`SlowLock`] around the backend's own lock: for a
    /// backend with nothing between it and its store (`MemoryLock`), or one whose connections
    /// no proxy can stand in (a Redis Cluster's clients follow redirections to the nodes' own
    /// addresses). Weaker than a delay below the backend: see [`SlowLock`].
    #[must_use]
    pub fn with_late_answers_around_the_lock(self) -> Self {
        let lockers = Arc::clone(&self.lockers);
        self.with_late_answers(move |latency| {
            let inner = Arc::clone(lockers().backend_lock());
            LockerBuilder::from_arc(Arc::new(SlowLock::new(inner, latency))).build()
        })
    }

    /// A fresh locker whose requests and answers are `latency` late, kept alive as long as
    /// the backend ([`Backend::with_late_answers`]).
    ///
    /// # Panics
    /// When the runner gave the backend no such lockers.
    #[must_use]
    pub fn late_locker(&self, latency: Duration) -> Locker {
        let Some(late) = &self.late else {
            panic!(
                "the runner gives no way to delay the backend's answers: call \
                 `Backend::with_late_answers` (or `_through` a proxy) in its setup"
            )
        };
        self.keep(late(latency))
    }

    /// The capability table of the backend's lock
    /// ([`Lock::capabilities`](lock_core::backend::Lock::capabilities) of the first locker's
    /// [`Locker::backend_lock`]): the one place where the suite learns what the backend
    /// offers.
    #[must_use]
    pub fn capabilities(&self) -> Capabilities {
        *self
            .capabilities
            .get_or_init(|| self.locker().backend_lock().capabilities())
    }

    /// Whether the backend offers the kind `module` checks (the mutex and the multi-lock are
    /// always offered).
    #[must_use]
    pub fn offers(&self, module: Module) -> bool {
        module.offered_by(&self.capabilities())
    }

    /// Whether a release on one locker wakes a waiter on another locker through the
    /// backend's announcement ([`Lock::watch`](lock_core::backend::Lock::watch) answers
    /// `Some`), as the capability table declares. When `false`,
    /// [`mutex::wakeups_across_lockers`] checks only that waiters still get in by polling.
    #[must_use]
    pub fn announces_releases(&self) -> bool {
        self.capabilities().announces_releases
    }

    /// What the backend's fencing tokens promise, as the capability table declares, with the
    /// hold of [`Fencing::AfterHolding`] taken from [`Backend::hold`].
    #[must_use]
    pub fn fencing(&self) -> Fencing {
        match self.capabilities().fencing {
            backend::Fencing::Strict(_) => Fencing::Strict,
            backend::Fencing::AfterHolding => Fencing::AfterHolding(self.hold),
            backend::Fencing::None => Fencing::None,
            // A promise this suite does not know yet: check only what every backend with
            // tokens keeps (each grant carries one) until the suite learns it.
            _ => Fencing::Unordered,
        }
    }

    /// A fresh locker on the store (its own waiting lines, reentrancy records and renewal
    /// task, like another process's). It lives as long as this backend (a clone is kept), so
    /// guards it grants are renewed even after the caller dropped it.
    #[must_use]
    pub fn locker(&self) -> Locker {
        self.keep((self.lockers)())
    }

    /// `locker`, kept alive as long as this backend: a locker's renewal task ends with it, and
    /// a check's guards must be renewed however it drops its lockers.
    fn keep(&self, locker: Locker) -> Locker {
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
            .field("hold", &self.hold)
            .field("capabilities", &self.capabilities.get())
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

/// Writes one test for every conformance module (`mutex`, `read_write`, ...): an `async fn`
/// named after the module, under the test attribute given (`#[tokio::test(...)]`), whose body
/// evaluates `setup` — an expression giving `(keep, backend)`: `keep` (a server, a set of
/// nodes, `()`) lives until the module's checks have run — and runs every check of the module
/// ([`Module::checks`]) over that one backend, [`CHECKS_AT_ONCE`] at a time, each on names of
/// its own ([`run_checks`]: a failure names its check; `DISTLOCK_CHECK=part` runs only the
/// checks whose name contains `part`). One server per module rather than per check: on two
/// cores, starting a PostgreSQL or forming a Redis Cluster for each of 43 checks was most of
/// a runner's time. For a module whose kind the backend does not offer
/// ([`Backend::offers`]), the test runs [`refused`] instead: the kind is refused with
/// `LockError::Unsupported` before any I/O. Every backend's runner is one such call, so a check
/// added to the list runs everywhere. The call also writes the test `listed_in_the_matrix`,
/// which fails unless the runner (its package and module) is in [`RUNNERS`], the list the
/// README's matrix is written from.
///
/// The tests are written in the calling module, so `setup` may name whatever it sees.
///
/// ```ignore
/// mod memory {
///     use std::sync::Arc;
///     use lock_core::{Locker, MemoryLock};
///     use lock_testkit::conformance::Backend;
///
///     fn backend() -> Backend {
///         let store = Arc::new(MemoryLock::new());
///         Backend::new(move || Locker::new(Arc::clone(&store)))
///     }
///
///     lock_testkit::conformance_tests!(#[tokio::test(start_paused = true)] ((), backend()));
/// }
/// ```
#[macro_export]
macro_rules! conformance_tests {
    (#[$attr:meta] $setup:expr) => {
        $crate::__conformance_checks!($crate::__conformance_modules; #[$attr] $setup);

        /// This runner is in the suite's list of runners
        /// (`lock_testkit::conformance::RUNNERS`), so the README's matrix has its row.
        #[test]
        fn listed_in_the_matrix() {
            $crate::conformance::assert_listed(env!("CARGO_PKG_NAME"), module_path!());
        }
    };
}

/// The one list of checks, module by module, handed to `$callback` after `$args`: what
/// [`conformance_tests!`] generates tests from and [`Module::checks`] answers. A check added
/// to a module is added here.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_checks {
    ($callback:path; $($args:tt)*) => {
        $callback! { $($args)*;
            mutex Mutex [
                exclusion_among_tasks,
                expiry_frees_the_name,
                stale_release_is_not_ours,
                stale_extend_is_not_ours,
                fencing_increases,
                hand_over_within_one_locker,
                wakeups_across_lockers,
                cancelled_acquire_leaves_nothing,
                lost_answer_leaves_nothing,
                renewal_outlives_the_lease,
                fixed_ttl_is_lost,
                renewal_notices_loss,
                bad_input_sends_nothing,
            ]
            read_write ReadWrite [
                readers_share,
                writer_excludes_readers_and_writers,
                writer_preference_queues_new_readers,
                gave_up_writer_lets_readers_in,
                writer_preference_off_lets_readers_in,
                last_reader_release_wakes_writer,
                writer_release_wakes_all_readers,
                read_fencing_token_is_last_write,
                each_reader_renewed_alone,
                reentrancy,
                cancelled_acquires_leave_nothing,
            ]
            semaphore Semaphore [
                never_more_than_max,
                k_permits_at_once,
                waiter_for_k_wakes_when_k_free,
                permits_mismatch_is_an_error,
                available_counts,
                cancelled_acquires_leave_nothing,
            ]
            fair Fair [
                grants_in_arrival_order,
                single_try_does_not_jump_the_queue,
                gave_up_waiter_leaves_no_trace,
                fair_is_the_mutex,
            ]
            multi Multi [
                all_or_nothing,
                no_deadlock_or_overlap,
                losing_one_is_losing_the_guard,
                cancelled_acquire_leaves_nothing,
            ]
            inspect Inspect [
                mutex_is_listed_with_its_holder,
                every_kind_is_shown_as_itself,
                fair_waiters_are_counted,
                described_waiters_are_listed,
                release_by_token_frees_for_the_next,
                bad_names_are_refused,
            ]
            errors Errors [
                refused_port_is_told,
                silent_port_is_a_timeout,
                another_kind_of_server_is_a_backend_error,
                unprepared_store_names_the_remedy,
                wrong_credentials_are_told,
            ]
            guarded Guarded [
                late_write_of_a_paused_holder_is_fenced,
                equal_token_is_accepted,
                every_successors_write_applies,
            ]
            lock_delay LockDelay [
                expired_holder_keeps_the_name_for_the_delay,
                release_frees_the_name_at_once,
                renewed_validity_is_the_leases,
            ]
            revocation Revocation [
                a_revocable_holder_is_told,
                revocation_is_for_the_grant_asked,
                announcing_backends_tell_at_once,
            ]
            latch Latch [
                opens_after_the_last_count_down,
                a_crashed_party_breaks_it,
                a_wait_is_bounded,
            ]
            barrier Barrier [
                members_enter_and_leave_together,
                a_crashed_member_is_counted_out,
            ]
            election Election [
                one_leader_at_a_time,
                resign_hands_over,
                leader_shows_term_and_value,
                observe_sees_terms_in_order,
                stop_margin_leaves_the_lease_valid,
                resume_a_kept_leadership,
            ]
        }
    };
}

/// The body of [`conformance_tests!`]: one test per conformance module.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_modules {
    (#[$attr:meta] $setup:expr; $($module:ident $variant:ident [$($check:ident),+ $(,)?])+) => {
        $(
            #[$attr]
            async fn $module() {
                let (_keep, backend) = $setup;
                let backend = &backend;
                let module = $crate::conformance::Module::$variant;
                // Each check's names start with its full path, unique among the runners of
                // one test binary, which may share a store.
                let path = concat!(module_path!(), "::", stringify!($module));
                if !backend.offers(module) {
                    $crate::conformance::refused(backend, module, path).await;
                    return;
                }
                let checks: ::std::vec::Vec<$crate::conformance::Check<'_>> = vec![$(
                    (
                        stringify!($check),
                        ::std::boxed::Box::pin(async move {
                            let prefix = concat!(
                                module_path!(), "::", stringify!($module), "::", stringify!($check)
                            );
                            $crate::conformance::$module::$check(backend, prefix).await;
                        }),
                    ),
                )+];
                $crate::conformance::run_checks(module, checks).await;
            }
        )+
    };
}
