//! The `Locker` handle, the state its clones share, and the mechanics every request goes
//! through on it: one attempt, one grant, one nested guard.
//!
//! The type is defined here, under the requests and the builder that hold or make a `Locker`,
//! so that imports in this folder run one way; its entry points (`lock`, `read`, `lock_all`,
//! ...) are in `mod.rs`, above the requests they start.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use metrics::SharedString;
use tokio::time::Instant;

use super::options::Options;
use super::pace::{Pace, RetryWarnings};
use crate::backend::{Attempt, Lock, MultiAttempt};
use crate::kind::Class;
use crate::metric::{self, Labels, Via};
use crate::runtime::cleanup::ReleaseOnDrop;
use crate::runtime::held::HeldLease;
use crate::runtime::owners::Owners;
use crate::runtime::renewal::Renewer;
use crate::runtime::waiters::{Ticket, Waiters};
use crate::{Backoff, Guard, Kind, Lease, LockError, Token};

/// Takes locks on one backend: validates input, waits a bounded time for held locks, renews the
/// leases of its guards, records metrics and tracing spans, and makes sure no acquire leaves a
/// lock behind when it is cancelled or fails half-way.
///
/// Cheap to clone (one `Arc`); share one per backend across the process: its renewal task
/// serves every guard it hands out. It may be used from several tokio runtimes, in sequence
/// or at once: a lease is renewed by a task on the runtime that granted it. If that runtime
/// shuts down while the guard lives on elsewhere, the next grant on another runtime takes the
/// lease over; with no such grant, the lease runs out and [`Guard::lost`] fires.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), lock_core::LockError> {
/// use std::time::Duration;
/// use lock_core::{Locker, MemoryLock};
///
/// let locker = Locker::new(MemoryLock::new());
/// // Renewed while the guard lives; waits at most 2 s for the lock.
/// let guard = locker.lock("order:42").wait(Duration::from_secs(2)).acquire().await?;
/// // ... work, passing guard.fencing_token() to the resource ...
/// guard.release().await?; // fails with LockError::NotOwned if the lease was no longer ours
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Locker {
    inner: Arc<Inner>,
}

/// What one attempt asks for: the TTL, and whether the `Locker` will renew the grant (a
/// backend may then put it on a lease it shares among renewed grants).
#[derive(Debug, Clone, Copy)]
pub(super) struct Ask {
    pub(super) ttl: Duration,
    pub(super) renewed: bool,
}

struct Inner {
    lock: Arc<dyn Lock>,
    /// The options every request starts with.
    defaults: Options,
    backoff: Backoff,
    /// Shared with the guards, which keep it alive: its watchdogs renew their leases.
    renewer: Arc<Renewer>,
    warnings: RetryWarnings,
    waiters: Arc<Waiters>,
    owners: Arc<Owners>,
    /// The metrics labels of requests without a label, built once per kind (indexed by
    /// [`Class`]).
    unlabelled: [&'static metric::Fixed; 5],
}

impl Locker {
    /// A locker over `lock` whose requests start with `defaults`.
    pub(super) fn with(lock: Arc<dyn Lock>, defaults: Options, backoff: Backoff) -> Self {
        let backend = lock.backend();
        Self {
            inner: Arc::new(Inner {
                renewer: Arc::new(Renewer::new(Arc::clone(&lock))),
                unlabelled: Class::ALL.map(|class| Labels::unlabelled_set(backend, class.label())),
                waiters: Arc::default(),
                owners: Arc::default(),
                warnings: RetryWarnings::new(backend, defaults.retry_errors_for()),
                lock,
                defaults,
                backoff,
            }),
        }
    }

    /// The backend's label (`"redis"`, `"memory"`, ...).
    #[must_use]
    pub fn backend(&self) -> &'static str {
        self.inner.lock.backend()
    }

    /// The backend this locker drives.
    #[must_use]
    pub fn backend_lock(&self) -> &Arc<dyn Lock> {
        &self.inner.lock
    }

    /// How long a request waits by default (`None`: without a bound).
    pub(crate) fn default_wait(&self) -> Option<Duration> {
        self.inner.defaults.wait()
    }

    /// The options a new request starts with.
    pub(super) fn defaults(&self) -> Options {
        self.inner.defaults.clone()
    }

    /// The labels of a request of `kind` with `label`; without one, the set built once.
    pub(super) fn labels(&self, kind: Kind, label: Option<SharedString>) -> Labels {
        let class = kind.class();
        Labels::new(
            self.backend(),
            class.label(),
            label,
            self.inner.unlabelled[class as usize],
        )
    }

    /// Starts the clock of a wait with `options`.
    pub(super) fn pace(&self, options: &Options) -> Pace<'_> {
        Pace::start(
            options.wait(),
            options.retry_errors_for(),
            &self.inner.warnings,
            &self.inner.backoff,
        )
    }

    /// Joins the back of this process's line for `name` in `class`, asking for `ttl` when the
    /// lock is handed over.
    pub(super) fn join_line(&self, name: &Arc<str>, class: Class, ttl: Duration) -> Ticket {
        self.inner.waiters.join(name, class, ttl)
    }

    /// Whether waiters of this process queue for `name` in `class`'s line.
    pub(super) fn has_local_waiters(&self, name: &str, class: Class) -> bool {
        self.inner.waiters.has_waiters(name, class)
    }

    /// Whether the current task already holds `name`, in `kind`'s family, through this locker.
    pub(super) fn holds_already(&self, name: &Arc<str>, kind: Kind) -> bool {
        self.inner.owners.current(name, kind).is_some()
    }

    /// A nested guard if the current task already holds `name` through this locker, counted
    /// as acquired `via="reentry"`: a mutex inside the mutex, a read or write inside the write
    /// lock, a read inside a read. A write inside a read share is refused
    /// ([`LockError::UpgradeRefused`]).
    pub(super) fn nested(
        &self,
        name: &Arc<str>,
        kind: Kind,
        labels: &Labels,
    ) -> Result<Option<Guard>, LockError> {
        let Some(held) = self.inner.owners.current(name, kind) else {
            return Ok(None);
        };
        if matches!(held.kind(), Kind::Read { .. }) && matches!(kind, Kind::Write { .. }) {
            return Err(LockError::UpgradeRefused {
                name: name.to_string(),
            });
        }
        labels.acquired(Via::Reentry);
        Ok(Some(Guard::nested(Arc::clone(&self.inner.lock), held)))
    }

    /// One attempt at `name` of `kind`, with a fresh token or the one of a waiting writer's
    /// `record`. Until the backend has answered, a release of that token is armed: if the
    /// attempt is cancelled or fails in a way that may have reached the backend, the token is
    /// released in the background, so nothing is left behind. A write found busy with writer
    /// preference left a record of itself: its release stays armed in `record` until the next
    /// attempt (which reuses the token, renewing the record) or the end of the request (which
    /// drops it, withdrawing the record).
    ///
    /// `asked_at` is when the request began: the armed release's lease needs an instant, and
    /// one the caller holds saves a reading of the clock per attempt. A mutex whose request
    /// renews its lease goes to [`Lock::try_acquire_renewed`](crate::backend::Lock::try_acquire_renewed).
    pub(super) async fn attempt(
        &self,
        name: &Arc<str>,
        kind: Kind,
        ask: Ask,
        labels: &Labels,
        record: &mut Option<ReleaseOnDrop>,
        asked_at: Instant,
    ) -> Result<Attempt, LockError> {
        let lock = &self.inner.lock;
        let token = match record.take() {
            Some(record) => {
                let token = *record.lease().token();
                record.disarm();
                token
            }
            None => Token::generate()?,
        };
        let pending = ReleaseOnDrop::new(
            Arc::clone(lock),
            Lease::new(Arc::clone(name), token, 0, asked_at).with_kind(kind),
        );
        labels.attempted();
        // The mutex goes straight to `try_acquire`: through `try_acquire_kind` every attempt
        // would box a second future (async_trait) only to forward to it.
        let Ask { ttl, renewed } = ask;
        let result = match kind {
            Kind::Mutex if renewed => lock.as_ref().try_acquire_renewed(name, token, ttl).await,
            Kind::Mutex => lock.as_ref().try_acquire(name, token, ttl).await,
            kind => lock.as_ref().try_acquire_kind(name, kind, token, ttl).await,
        };
        match &result {
            Err(error) if error.may_have_applied() => {
                labels.count_with(metric::BACKEND_ERRORS_TOTAL, "op", "acquire");
                drop(pending);
            }
            Ok(Attempt::Busy { .. }) if kind.records_waiter() => *record = Some(pending),
            _ => pending.disarm(),
        }
        result
    }

    /// One attempt at every name of a multi-lock with one fresh token. Until the backend has
    /// answered, a release of that token on every name is armed, so a cancelled or failed
    /// attempt leaves nothing behind.
    pub(super) async fn attempt_all(
        &self,
        names: &[Arc<str>],
        ttl: Duration,
        labels: &Labels,
    ) -> Result<MultiAttempt, LockError> {
        let lock = &self.inner.lock;
        let token = Token::generate()?;
        let pending: Vec<ReleaseOnDrop> = names
            .iter()
            .map(|name| {
                let lease = Lease::new(Arc::clone(name), token, 0, Instant::now());
                ReleaseOnDrop::new(Arc::clone(lock), lease)
            })
            .collect();
        labels.attempted();
        let result = lock.as_ref().try_acquire_all(names, token, ttl).await;
        match &result {
            Err(error) if error.may_have_applied() => {
                labels.count_with(metric::BACKEND_ERRORS_TOTAL, "op", "acquire");
                drop(pending);
            }
            _ => pending.into_iter().for_each(ReleaseOnDrop::disarm),
        }
        result
    }

    /// Wraps a lease granted on `name` in a guard, registering it with the watchdog (for renewal
    /// unless its TTL is fixed, and for the oldest-hold gauge); `via` says how it was granted
    /// (the `via` label of `distlock_acquired_total`), `started` when its request began to wait.
    pub(super) fn grant(
        &self,
        name: &Arc<str>,
        lease: Lease,
        labels: &Labels,
        started: Instant,
        via: Via,
        options: &Options,
    ) -> Guard {
        let inner = &self.inner;
        // One reading of the clock for the wait, the hold's start and the first renewal.
        let now = Instant::now();
        labels.granted(
            via,
            now.saturating_duration_since(started),
            lease.kind().permits(),
        );
        let renewal = options.renewal();
        let held = Arc::new(
            HeldLease::new(
                &lease,
                labels.clone(),
                renewal,
                options.max_hold(),
                options.stop_margin_for(options.ttl()),
                now,
            )
            .with_lock_delay(options.lock_delay())
            .with_revocable(options.revocable()),
        );
        // Renewed, or only watched for the oldest-hold gauge when its TTL is fixed; the
        // watchdog also asks the backend to watch its key for loss when it takes it in.
        inner.renewer.track(Arc::clone(&held), now);
        crate::runtime::revocation::listen_for_revocation(&inner.lock, &held);
        let owner = inner
            .owners
            .enter(name, &held)
            .map(|task| (Arc::clone(&inner.owners), task));
        Guard::new(
            Arc::clone(&inner.renewer),
            Arc::clone(&inner.lock),
            held,
            Arc::clone(&inner.waiters),
            owner,
        )
    }
}

/// The kind a single try asks for: a write that does not wait does not record itself as a
/// waiting writer, nor a fair request take a place in the queue (either would hold others back
/// for nothing).
pub(super) fn single_try(kind: Kind) -> Kind {
    match kind {
        Kind::Write { .. } => Kind::Write {
            writer_preference: false,
        },
        Kind::Fair { .. } => Kind::Fair { queued: false },
        kind => kind,
    }
}

impl fmt::Debug for Locker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let defaults = &self.inner.defaults;
        f.debug_struct("Locker")
            .field("backend", &self.backend())
            .field("lease", &defaults.ttl())
            .field("wait", &defaults.wait())
            .field("retry_errors_for", &defaults.retry_errors_for())
            .field("backoff", &self.inner.backoff)
            .field("max_hold", &defaults.max_hold())
            .finish()
    }
}
