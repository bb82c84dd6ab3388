//! The policy every backend shares: validation, bounded waiting, renewal, metrics, tracing,
//! cleanup on cancellation.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use metrics::SharedString;
use tokio::time::Instant;
use tracing::Instrument;

use crate::cleanup::ReleaseOnDrop;
use crate::held::Held;
use crate::kind::Class;
use crate::metric::{self, Labels, Via};
use crate::multi::MultiRequest;
use crate::owners::Owners;
use crate::renewal::Renewer;
use crate::waiters::Waiters;
use crate::{
    Attempt, Backoff, Guard, Kind, Lease, LeaseWatch, Lock, LockError, MAX_PERMITS, TimeoutPhase,
    Token, check_name, check_ttl,
};

/// The lease of a renewed lock (one whose request names no fixed TTL): 30 s, renewed every
/// 10 s while its guard lives.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How long [`LockRequest::acquire`] waits for a held lock when the request names no wait: 10 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// How long [`LockRequest::acquire`] keeps retrying a backend that fails (Redis down, a
/// dropped connection) before it returns the error, when neither the locker nor the request
/// sets it: 5 s. "The lock is busy" is waited for as long as the request's wait; "the store is
/// unreachable" only this long, however long the wait.
pub const DEFAULT_RETRY_ERRORS_FOR: Duration = Duration::from_secs(5);

/// At most one warning a second per locker for backend failures retried while waiting.
const WARN_EVERY: Duration = Duration::from_secs(1);

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

struct Inner {
    lock: Arc<dyn Lock>,
    lease: Duration,
    wait: Option<Duration>,
    retry_errors_for: Duration,
    backoff: Backoff,
    max_hold: Option<Duration>,
    renewer: Renewer,
    /// When a retried backend failure was last logged at `warn` (rate limit).
    warned: std::sync::Mutex<Option<Instant>>,
    waiters: Arc<Waiters>,
    owners: Arc<Owners>,
    /// The metrics labels of requests without a label, built once per kind (indexed by
    /// [`Class`]).
    unlabelled: [&'static crate::metric::Fixed; 5],
}

impl Locker {
    /// A locker over `lock` with the defaults: [`DEFAULT_LEASE`], [`DEFAULT_WAIT`],
    /// [`Backoff::default`], no cap on hold time.
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
    /// The guard's [`fencing_token`](Guard::fencing_token) is the token of the last write
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
        MultiRequest::new(self.request(Arc::from(""), Kind::Mutex), names)
    }

    /// The sleep between attempts while waiting.
    pub(crate) fn backoff(&self) -> &Backoff {
        &self.inner.backoff
    }

    fn request(&self, name: Arc<str>, kind: Kind) -> LockRequest {
        LockRequest {
            locker: self.clone(),
            name,
            kind,
            misuse: None,
            expiry: Expiry::Renewed(self.inner.lease),
            wait: self.inner.wait,
            retry_errors_for: self.inner.retry_errors_for,
            label: None,
            max_hold: self.inner.max_hold,
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

    /// Releases a lease obtained from [`Guard::leak`], if it is still ours.
    ///
    /// # Errors
    /// [`LockError::NotOwned`] when the lease was no longer ours (nothing was changed); the
    /// backend's errors, as [`Lock::release`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the lease is held or released.
    pub async fn release(&self, lease: &Lease) -> Result<(), LockError> {
        if self.inner.lock.as_ref().release(lease).await? {
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
        self.inner.lock.as_ref().ping().await
    }
}

impl fmt::Debug for Locker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locker")
            .field("backend", &self.backend())
            .field("lease", &self.inner.lease)
            .field("wait", &self.inner.wait)
            .field("retry_errors_for", &self.inner.retry_errors_for)
            .field("backoff", &self.inner.backoff)
            .field("max_hold", &self.inner.max_hold)
            .finish()
    }
}

/// Configures a [`Locker`]: the lease of renewed locks, the default wait, the waiting backoff
/// and the cap on hold time.
#[derive(Clone)]
#[must_use]
pub struct LockerBuilder {
    lock: Arc<dyn Lock>,
    lease: Duration,
    wait: Option<Duration>,
    retry_errors_for: Duration,
    backoff: Backoff,
    max_hold: Option<Duration>,
}

impl LockerBuilder {
    /// Starts configuring a locker over a shared backend.
    pub fn from_arc(lock: Arc<dyn Lock>) -> Self {
        Self {
            lock,
            lease: DEFAULT_LEASE,
            wait: Some(DEFAULT_WAIT),
            retry_errors_for: DEFAULT_RETRY_ERRORS_FOR,
            backoff: Backoff::default(),
            max_hold: None,
        }
    }

    /// The lease of renewed locks (default [`DEFAULT_LEASE`]): each renewal extends it to this
    /// much from now, every third of it. A crashed holder's lock is free at most this long after
    /// the crash. Checked when a request is made, like a per-request TTL. A request can take
    /// another length with [`LockRequest::lease`], or a fixed, unrenewed TTL with
    /// [`LockRequest::fixed_ttl`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Stop renewing a lease this long after it was granted (default: never), for users who
    /// prefer liveness over endless renewal: past it the lease runs out and
    /// [`Guard::lost`] fires. Requests can override it.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// How long requests that name no wait wait for a held lock (default [`DEFAULT_WAIT`]);
    /// see [`LockRequest::wait`].
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = deadline_free(wait);
        self
    }

    /// How long a waiting request retries a failing backend before returning its error
    /// (default [`DEFAULT_RETRY_ERRORS_FOR`]); see [`LockRequest::retry_errors_for`].
    pub fn retry_errors_for(mut self, budget: Duration) -> Self {
        self.retry_errors_for = budget;
        self
    }

    /// The sleep between attempts while waiting (default [`Backoff::default`]).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The locker.
    ///
    /// Also [describes](metric::describe) the metric series to the `metrics` recorder installed
    /// at this point, if any.
    pub fn build(self) -> Locker {
        metric::describe();
        Locker {
            inner: Arc::new(Inner {
                renewer: Renewer::new(Arc::clone(&self.lock)),
                unlabelled: Class::ALL
                    .map(|class| Labels::unlabelled_set(self.lock.backend(), class.label())),
                waiters: Arc::default(),
                owners: Arc::default(),
                lock: self.lock,
                lease: self.lease,
                wait: self.wait,
                retry_errors_for: self.retry_errors_for,
                backoff: self.backoff,
                max_hold: self.max_hold,
                warned: std::sync::Mutex::new(None),
            }),
        }
    }
}

impl fmt::Debug for LockerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockerBuilder")
            .field("backend", &self.lock.backend())
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("retry_errors_for", &self.retry_errors_for)
            .field("backoff", &self.backoff)
            .field("max_hold", &self.max_hold)
            .finish()
    }
}

/// A request for one lock, made by [`Locker::lock`], [`Locker::read`], [`Locker::write`] or
/// [`Locker::semaphore`]: choose how the lease ends
/// ([`lease`](LockRequest::lease), renewed, the default; or [`fixed_ttl`](LockRequest::fixed_ttl)),
/// the wait and the metrics label, then [`acquire`](LockRequest::acquire) (or `.await` it),
/// [`try_acquire`](LockRequest::try_acquire) or [`run`](LockRequest::run).
#[must_use = "a lock request does nothing until it is awaited"]
#[derive(Debug)]
pub struct LockRequest {
    locker: Locker,
    name: Arc<str>,
    kind: Kind,
    /// A builder method that does not fit the kind (`permits` on a mutex), reported by
    /// `check` as invalid input.
    misuse: Option<&'static str>,
    expiry: Expiry,
    /// `None`: wait without a deadline.
    wait: Option<Duration>,
    retry_errors_for: Duration,
    label: Option<SharedString>,
    max_hold: Option<Duration>,
}

/// How a granted lease ends.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    /// Renewed to this length every third of it while the guard lives.
    Renewed(Duration),
    /// Expires this long after the grant; never renewed.
    Fixed(Duration),
}

impl Expiry {
    fn ttl(self) -> Duration {
        match self {
            Self::Renewed(ttl) | Self::Fixed(ttl) => ttl,
        }
    }
}

impl LockRequest {
    /// For a [`semaphore`](Locker::semaphore) request: take `permits` permits at once (all or
    /// none; default 1), between 1 and the semaphore's `max`. On any other request it makes
    /// the request fail with [`LockError::InvalidInput`].
    pub fn permits(mut self, permits: u32) -> Self {
        match &mut self.kind {
            Kind::Semaphore { permits: p, .. } => *p = permits,
            _ => self.misuse = Some("permits() is for semaphore requests"),
        }
        self
    }

    /// For a [`read`](Locker::read) or [`write`](Locker::write) request: whether writers go
    /// first (default `true`). A writer with it records that it waits, so that readers with
    /// it, arriving later, queue behind it; `false` on a reader lets it in beside waiting
    /// writers, `false` on a writer records nothing (it then gets in only when no reader
    /// holds the name). On any other request it makes the request fail with
    /// [`LockError::InvalidInput`].
    pub fn writer_preference(mut self, on: bool) -> Self {
        match &mut self.kind {
            Kind::Read { writer_preference } | Kind::Write { writer_preference } => {
                *writer_preference = on;
            }
            _ => self.misuse = Some("writer_preference() is for read and write requests"),
        }
        self
    }

    /// What this request asks for.
    #[must_use]
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// For a [`semaphore`](Locker::semaphore) request: how many of its `max` permits are free
    /// now (held permits whose lease expired count as free). Sends one query; changes nothing.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a bad name or a request that is not a semaphore's;
    /// [`LockError::Unsupported`] from a backend without semaphores; the backend's errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    pub async fn available(&self) -> Result<u32, LockError> {
        let Kind::Semaphore { max, .. } = self.kind else {
            return Err(LockError::invalid("available() is for semaphore requests"));
        };
        check_name(&self.name)?;
        let in_use = self
            .locker
            .inner
            .lock
            .as_ref()
            .permits_in_use(&self.name)
            .await?;
        Ok(max.saturating_sub(in_use))
    }

    /// A renewed lease of this length (default: the locker's, [`LockerBuilder::lease`]): the
    /// watchdog extends it to `lease` from now every third of it while the guard lives, so the
    /// lock outlives any work, and a crashed holder's lock is free at most `lease` after the
    /// crash. The choice for work of unknown length. Between [`MIN_TTL`](crate::MIN_TTL) and
    /// [`MAX_TTL`](crate::MAX_TTL).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.expiry = Expiry::Renewed(lease);
        self
    }

    /// A fixed TTL, **not renewed**: the lock expires `ttl` after the grant unless extended by
    /// hand ([`Guard::extend`]), and [`Guard::lost`] fires then, whether the work is done or
    /// not. The choice for work with a known bound, or for a lock that must end by itself
    /// (ShedLock's "lock at most for"). Between [`MIN_TTL`](crate::MIN_TTL) (1 ms) and
    /// [`MAX_TTL`](crate::MAX_TTL); sub-millisecond parts are dropped.
    pub fn fixed_ttl(mut self, ttl: Duration) -> Self {
        self.expiry = Expiry::Fixed(ttl);
        self
    }

    /// The old name of [`fixed_ttl`](LockRequest::fixed_ttl): a fixed TTL, not renewed.
    #[deprecated(
        since = "0.1.0",
        note = "`ttl` turns renewal off: say so with `fixed_ttl`, or use `lease` for a renewed lease of another length"
    )]
    pub fn ttl(self, ttl: Duration) -> Self {
        self.fixed_ttl(ttl)
    }

    /// How long [`acquire`](LockRequest::acquire) waits for a held lock before giving up with
    /// [`LockError::Timeout`]. `Duration::ZERO` makes one attempt. A wait too long for the
    /// clock (`Duration::MAX`) is [`wait_forever`](LockRequest::wait_forever).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = deadline_free(wait);
        self
    }

    /// Waits without a deadline: [`acquire`](LockRequest::acquire) returns when the lock is
    /// granted, when the request is dropped (put it in a `tokio::select!` or a
    /// `tokio::time::timeout` to stop it), or when the backend keeps failing for longer than
    /// [`retry_errors_for`](LockRequest::retry_errors_for). For a worker that must eventually
    /// run.
    pub fn wait_forever(mut self) -> Self {
        self.wait = None;
        self
    }

    /// How long [`acquire`](LockRequest::acquire) retries a backend that keeps failing with
    /// retryable errors (Redis down or restarting, a dropped connection) before it returns the
    /// last error, however long the wait (default: the locker's,
    /// [`DEFAULT_RETRY_ERRORS_FOR`]). The clock restarts whenever the backend answers. Each
    /// retried failure is logged at `warn` (at most once a second per locker).
    pub fn retry_errors_for(mut self, budget: Duration) -> Self {
        self.retry_errors_for = budget;
        self
    }

    /// The `lock` label of this request's metrics: the name's *template* (`"order:{id}"`), not
    /// the rendered name, so the number of series stays bounded. Default `"unlabelled"`.
    pub fn label(mut self, label: impl Into<SharedString>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// For a renewed lease: stop renewing this long after the grant; see
    /// [`LockerBuilder::max_hold`].
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// Tries once. `Ok(None)` when another holder has the lock, or when waiters of this process
    /// queue for it (a single try does not jump their line; nothing is sent then). A nested
    /// guard when the current task holds it already (see [`acquire`](LockRequest::acquire)).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a bad name or TTL (nothing sent); the backend's errors
    /// ([`LockError::WrongType`], [`LockError::Timeout`], [`LockError::Backend`]).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped after the request was sent, whatever it may have acquired is released
    /// in the background.
    pub async fn try_acquire(self) -> Result<Option<Guard>, LockError> {
        let labels = self.labels();
        let span = tracing::debug_span!("acquire", name = %self.name, backend = labels.backend, kind = labels.kind, attempts = 1, outcome = tracing::field::Empty);
        async {
            let started = Instant::now();
            let result = match self.check() {
                Ok(_) if self.holds_already() => self.nested(&labels),
                // Waiters of this process are ahead of a single try: it does not jump the line.
                Ok(_) if self.has_local_waiters() => Ok(None),
                Ok(ttl) => self
                    .attempt(ttl, self.single_try_kind(), &labels, &mut None)
                    .await
                    .map(|attempt| match attempt {
                        Attempt::Acquired(lease) => {
                            Some(self.grant(lease, &labels, started, Via::Attempt))
                        }
                        Attempt::Busy { .. } => None,
                    }),
                Err(error) => Err(error),
            };
            let outcome = match &result {
                Ok(Some(_)) => "acquired",
                Ok(None) => "busy",
                Err(error) => failure_reason(error),
            };
            if outcome != "acquired" {
                labels.count_with(metric::NOT_ACQUIRED_TOTAL, "reason", outcome);
            }
            tracing::Span::current().record("outcome", outcome);
            result
        }
        .instrument(span)
        .await
    }

    /// Acquires the lock, waiting for it while another holder has it, until the wait runs out.
    ///
    /// Waiters of one process for one name queue first-in first-out and only the first
    /// contends. It is woken by the release: at once when the holder is in this process, by
    /// the backend's release announcement otherwise (Redis pub/sub; see [`Lock::watch`]), and in
    /// any case when the holder's TTL runs out, so a lost announcement costs latency, never
    /// liveness. A backend that announces nothing is polled with the locker's [`Backoff`]
    /// (exponential, full jitter), never longer than the holder's remaining TTL.
    ///
    /// A holder that never announces its release (another client on the same name: redis-py,
    /// node-redlock, redsync) is polled with the [`Backoff`], so a release there is noticed
    /// within the backoff's ceiling (100 ms by default); see [`Attempt::Busy`].
    ///
    /// **Reentrancy**: if the current tokio task already holds this name through this locker,
    /// the answer is at once a *nested* guard on the same lease (the request's TTL is ignored);
    /// the lease is released when the outermost guard is. Other tasks — including tasks this
    /// one spawns — wait as usual. Outside a tokio task there is no reentrancy: the future that
    /// `#[tokio::main]` or `Runtime::block_on` drives is not a task, so code there that asks
    /// again for a name it holds waits for itself (until its wait runs out).
    ///
    /// # Errors
    /// [`LockError::Timeout`] with [`TimeoutPhase::Wait`] when the lock was still held at the
    /// deadline; [`LockError::InvalidInput`] for a bad name or TTL (nothing sent).
    /// Backend errors that [`LockError::is_retryable`] (Redis restarting, a dropped connection)
    /// are retried for [`retry_errors_for`](LockRequest::retry_errors_for) in a row (or until
    /// the deadline, if sooner), then the last one is returned; others
    /// ([`LockError::WrongType`], a wrong password) are returned at once.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any await point, whatever it may have acquired is released in the
    /// background.
    pub async fn acquire(self) -> Result<Guard, LockError> {
        let labels = self.labels();
        let span = tracing::debug_span!(
            "acquire",
            name = %self.name,
            backend = labels.backend,
            kind = labels.kind,
            attempts = tracing::field::Empty,
            outcome = tracing::field::Empty
        );
        async {
            let mut attempts = 0;
            let result = self.wait_for_grant(&labels, &mut attempts).await;
            let outcome = match &result {
                Ok(_) => "acquired",
                Err(error) => {
                    labels.count_with(metric::NOT_ACQUIRED_TOTAL, "reason", failure_reason(error));
                    failure_reason(error)
                }
            };
            tracing::Span::current()
                .record("attempts", attempts)
                .record("outcome", outcome);
            result
        }
        .instrument(span)
        .await
    }

    /// Runs `work` under the lock: acquires it (as [`acquire`](LockRequest::acquire)), runs the
    /// work with a [`LeaseWatch`] of the lease, and releases the lock when the work is done.
    /// If the lease is lost first, the work is cancelled (dropped at its current await point)
    /// and `Err(LockError::Lost)` is returned: code after that await never runs without the
    /// lock as far as this process can tell. (Another process may still see the stalled
    /// holder's earlier writes: pass [`LeaseWatch::fencing_token`] to the resource.)
    ///
    /// A release that finds the lease no longer ours after the work finished returns
    /// [`LockError::NotOwned`] instead of the work's output: the work ran, at least at its
    /// end, without the lock, and the caller must hear of it. A release that fails (the backend
    /// is down) is logged, not returned: the lease was ours as far as anyone can tell, and the
    /// lock expires at the end of its lease.
    ///
    /// # Errors
    /// Those of [`acquire`](LockRequest::acquire), [`LockError::Lost`], and
    /// [`LockError::NotOwned`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the work is dropped and the lock released in the background.
    pub async fn run<F, Fut, T>(self, work: F) -> Result<T, LockError>
    where
        F: FnOnce(LeaseWatch) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.acquire().await?;
        let lost = guard.lost();
        let work = work(guard.watch());
        tokio::select! {
            biased;
            () = lost => {
                let name = guard.name().to_owned();
                drop(guard);
                Err(LockError::Lost { name })
            }
            out = work => match guard.release().await {
                Err(error @ LockError::NotOwned { .. }) => Err(error),
                Err(error) => {
                    tracing::warn!(%error, "release after the work failed; the lock expires at the end of its lease");
                    Ok(out)
                }
                Ok(()) => Ok(out),
            }
        }
    }

    /// The locker this request is for.
    pub(crate) fn locker(&self) -> &Locker {
        &self.locker
    }

    /// The request's own metrics label, if it set one.
    pub(crate) fn label_value(&self) -> Option<SharedString> {
        self.label.clone()
    }

    /// The wait; `None` without a deadline.
    pub(crate) fn wait_value(&self) -> Option<Duration> {
        self.wait
    }

    /// How long a failing backend is retried while waiting.
    pub(crate) fn retry_errors_value(&self) -> Duration {
        self.retry_errors_for
    }

    /// The same request (kind and options) for another name.
    pub(crate) fn for_name(&self, name: Arc<str>) -> LockRequest {
        LockRequest {
            locker: self.locker.clone(),
            name,
            kind: self.kind,
            misuse: self.misuse,
            expiry: self.expiry,
            wait: self.wait,
            retry_errors_for: self.retry_errors_for,
            label: self.label.clone(),
            max_hold: self.max_hold,
        }
    }

    fn labels(&self) -> Labels {
        let class = self.kind.class();
        Labels::new(
            self.locker.backend(),
            class.label(),
            self.label.clone(),
            self.locker.inner.unlabelled[class as usize],
        )
    }

    /// The checked input: the TTL each attempt asks for.
    pub(crate) fn check(&self) -> Result<Duration, LockError> {
        if let Some(misuse) = self.misuse {
            return Err(LockError::invalid(misuse));
        }
        check_name(&self.name)?;
        let ttl = self.expiry.ttl();
        check_ttl(ttl)?;
        if let Kind::Semaphore { permits, max } = self.kind {
            if max == 0 || max > MAX_PERMITS {
                return Err(LockError::invalid(format!(
                    "a semaphore has 1 to {MAX_PERMITS} permits, not {max}"
                )));
            }
            if permits == 0 || permits > max {
                return Err(LockError::invalid(format!(
                    "a request takes 1 to {max} permits of this semaphore, not {permits}"
                )));
            }
        }
        Ok(ttl)
    }

    /// Whether the current task already holds this name, in this kind's family, through this
    /// locker.
    fn holds_already(&self) -> bool {
        self.locker
            .inner
            .owners
            .current(&self.name, self.kind)
            .is_some()
    }

    /// A nested guard if the current task already holds this name through this locker, counted
    /// as acquired `via="reentry"`: a mutex inside the mutex, a read or write inside the write
    /// lock, a read inside a read. A write inside a read share is refused
    /// ([`LockError::UpgradeRefused`]).
    pub(crate) fn nested(&self, labels: &Labels) -> Result<Option<Guard>, LockError> {
        let inner = &self.locker.inner;
        let Some(held) = inner.owners.current(&self.name, self.kind) else {
            return Ok(None);
        };
        if matches!(held.kind(), Kind::Read { .. }) && matches!(self.kind, Kind::Write { .. }) {
            return Err(LockError::UpgradeRefused {
                name: self.name.to_string(),
            });
        }
        labels.acquired(Via::Reentry);
        Ok(Some(Guard::nested(Arc::clone(&inner.lock), held)))
    }

    /// Whether waiters of this process queue for this name and kind.
    fn has_local_waiters(&self) -> bool {
        self.locker
            .inner
            .waiters
            .has_waiters(&self.name, self.kind.class())
    }

    /// How long a busy attempt may wait before the next: the holder's TTL, but for a waiter
    /// that left a record (a writer with writer preference, a fair waiter) at most half the
    /// time its record lasts, so the next attempt renews the record before it lapses.
    fn retry_within(&self, holder_ttl: Option<Duration>, ttl: Duration) -> Option<Duration> {
        let lasts = match self.kind {
            Kind::Write {
                writer_preference: true,
            } => ttl,
            Kind::Fair { queued: true } => crate::fair_entry_ttl(ttl),
            _ => return holder_ttl,
        };
        Some(holder_ttl.map_or(lasts / 2, |holder| holder.min(lasts / 2)))
    }

    /// The kind a single try asks for: a write that does not wait does not record itself as
    /// a waiting writer, nor a fair request take a place in the queue (either would hold others
    /// back for nothing).
    fn single_try_kind(&self) -> Kind {
        match self.kind {
            Kind::Write { .. } => Kind::Write {
                writer_preference: false,
            },
            Kind::Fair { .. } => Kind::Fair { queued: false },
            kind => kind,
        }
    }

    /// Waits for the grant; a request that ends without the lock (deadline, error) withdraws
    /// its waiter's record from the backend before it returns, so the readers a waiting writer
    /// held back (or the fair waiters behind it) are let in as soon as the caller hears of it.
    /// (Cancelled, the record is withdrawn in the background.)
    async fn wait_for_grant(
        &self,
        labels: &Labels,
        attempts: &mut u32,
    ) -> Result<Guard, LockError> {
        let mut record = None;
        let result = self.wait_in_line(labels, attempts, &mut record).await;
        match (&result, record) {
            (Err(_), Some(record)) => {
                let lease = record.lease().clone();
                match self.locker.inner.lock.as_ref().release(&lease).await {
                    Ok(_) => record.disarm(),
                    // Kept armed: dropped, it tries again in the background.
                    Err(error) => {
                        tracing::debug!(%error, "withdrawing the waiter's record failed");
                    }
                }
            }
            // A grant consumed the record (its token is the lease's): nothing to withdraw.
            (Ok(_), Some(record)) => record.disarm(),
            (_, None) => {}
        }
        result
    }

    async fn wait_in_line(
        &self,
        labels: &Labels,
        attempts: &mut u32,
        waiting_record: &mut Option<ReleaseOnDrop>,
    ) -> Result<Guard, LockError> {
        let ttl = self.check()?;
        if let Some(nested) = self.nested(labels)? {
            return Ok(nested);
        }
        let inner = &self.locker.inner;
        let started = Instant::now();
        // No deadline: a sleep that never ends (`wait` stored the ones the clock cannot hold as
        // `None`).
        let deadline = self.wait.and_then(|wait| started.checked_add(wait));
        let until_deadline = || async move {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        let mut failing_since = None;
        let timed_out = || LockError::Timeout {
            phase: TimeoutPhase::Wait,
            elapsed: started.elapsed(),
        };
        // A request that does not wait asks as a single try does: a writer records nothing.
        let kind = if self.wait == Some(Duration::ZERO) {
            self.single_try_kind()
        } else {
            self.kind
        };
        let ticket = inner.waiters.join(&self.name, self.kind.class(), ttl);
        let mut waiting = None;
        let mut tried_watch = false;
        // `waiting_record`: a waiter's record in the backend (a waiting writer, a fair waiter's
        // queue entry): the token of its busy attempts, reused by the next one, and released if
        // the request ends without the lock.
        // A fair waiter's subscription to its own turn, and the token it is for.
        let fair = kind == Kind::Fair { queued: true };
        let mut turn: Option<crate::ReleaseWatch> = None;
        let mut turn_token = None;
        loop {
            if !ticket.is_head() {
                waiting.get_or_insert_with(|| Waiting::enter(labels.clone()));
                tokio::select! {
                    () = ticket.my_turn() => continue,
                    () = until_deadline() => return Err(timed_out()),
                }
            }
            // Read the signals before anything else: a release or handoff after this point
            // bumps `local`, so the waits below cannot miss it.
            let signals = ticket.signals();
            let local_seen = signals.local.generation();
            // A guard of this process released the name by handing it to us. (Looked for
            // after reading the signals: a handoff landing between the two would otherwise
            // leave us waiting for the handed lease's validity.)
            if let Some(lease) = ticket.take_handed() {
                let guard = self.grant(lease, labels, started, Via::Handover);
                ticket.granted(guard.held());
                drop(ticket); // the next in line becomes head, and waits for our release
                return Ok(guard);
            }
            if let Some(held_until) = signals.held_until {
                // A guard of this process holds it: wait for its release rather than send an
                // attempt that cannot succeed (at the lease's validity — as renewal moves it —
                // try anyway).
                waiting.get_or_insert_with(|| Waiting::enter(labels.clone()));
                let until = deadline.map_or(held_until, |deadline| held_until.min(deadline));
                tokio::select! {
                    () = signals.local.changed_since(local_seen) => {}
                    () = tokio::time::sleep_until(until) => {
                        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                            // Still held here: an attempt could not succeed.
                            return Err(timed_out());
                        }
                        ticket.granted_expired();
                    }
                }
                continue;
            }
            let remote_seen = signals.remote.as_ref().map(|w| w.signal().generation());
            let turn_seen = turn.as_ref().map(|w| w.signal().generation());
            *attempts = attempts.saturating_add(1);
            // A transient backend failure (connection dropped, server restarting) is retried
            // like a busy lock, within the same wait; the caller sees it if it outlasts the wait.
            let attempt = self.attempt(ttl, kind, labels, waiting_record).await;
            let (holder_ttl, announces, mut failure) = match attempt {
                Ok(Attempt::Acquired(lease)) => {
                    let guard = self.grant(lease, labels, started, Via::Attempt);
                    ticket.granted(guard.held());
                    drop(ticket); // the next in line becomes head
                    return Ok(guard);
                }
                Ok(Attempt::Busy {
                    holder_ttl,
                    announces,
                }) => {
                    failing_since = None;
                    (self.retry_within(holder_ttl, ttl), announces, None)
                }
                Err(error) if error.is_retryable() => (None, false, Some(error)),
                Err(error) => return Err(error),
            };
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Err(failure.unwrap_or_else(timed_out));
            }
            if let Some(error) = failure.take() {
                failure = Some(self.locker.retry_or_return(
                    &self.name,
                    error,
                    &mut failing_since,
                    self.retry_errors_for,
                )?);
            }
            waiting.get_or_insert_with(|| Waiting::enter(labels.clone()));
            // Subscribe to the name's releases once per line, then try again at once: a
            // release may have landed between the busy answer and the subscription. A fair
            // waiter also subscribes to its own turn, once per token (a fair holder's release
            // tells the head of the queue alone).
            if signals.remote.is_none() && failure.is_none() && !tried_watch {
                tried_watch = true;
                match inner.lock.as_ref().watch(&self.name).await {
                    Ok(Some(watch)) => {
                        ticket.share_watch(watch);
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::debug!(%error, "subscribing to releases failed; polling instead");
                    }
                }
            }
            if fair
                && failure.is_none()
                && let Some(token) = waiting_record.as_ref().map(|r| *r.lease().token())
                && turn_token != Some(token)
            {
                turn_token = Some(token);
                match inner.lock.as_ref().watch_turn(&self.name, &token).await {
                    Ok(Some(watch)) => {
                        turn = Some(watch);
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::debug!(%error, "subscribing to the turn failed; polling instead");
                    }
                }
            }
            let left = deadline.map_or(Duration::MAX, |deadline| {
                deadline.saturating_duration_since(Instant::now())
            });
            let delay = match (&signals.remote, holder_ttl, &failure) {
                // Woken by the release message; the holder's TTL is the fallback if it is lost.
                (Some(_), Some(holder_ttl), None) if announces => {
                    holder_ttl.max(crate::MIN_TTL).min(left)
                }
                // Not subscribed, a holder that never announces, or a failing backend: poll.
                _ => inner.backoff.delay(*attempts, holder_ttl, left),
            };
            tokio::select! {
                () = signals.local.changed_since(local_seen) => {}
                () = changed(signals.remote.as_deref(), remote_seen) => {}
                () = changed(turn.as_ref(), turn_seen) => {}
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One attempt of `kind`, with a fresh token or the one of a waiting writer's `record`.
    /// Until the backend has answered, a release of that token is armed: if the attempt is
    /// cancelled or fails in a way that may have reached the backend, the token is released in
    /// the background, so nothing is left behind. A write found busy with writer preference
    /// left a record of itself: its release stays armed in `record` until the next attempt
    /// (which reuses the token, renewing the record) or the end of the request (which drops
    /// it, withdrawing the record).
    async fn attempt(
        &self,
        ttl: Duration,
        kind: Kind,
        labels: &Labels,
        record: &mut Option<ReleaseOnDrop>,
    ) -> Result<Attempt, LockError> {
        let lock = &self.locker.inner.lock;
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
            Lease::new(Arc::clone(&self.name), token, 0, Instant::now()).with_kind(kind),
        );
        labels.count(metric::ACQUIRE_ATTEMPTS_TOTAL);
        // The mutex goes straight to `try_acquire`: through `try_acquire_kind` every attempt
        // would box a second future (async_trait) only to forward to it.
        let result = match kind {
            Kind::Mutex => lock.as_ref().try_acquire(&self.name, token, ttl).await,
            kind => {
                lock.as_ref()
                    .try_acquire_kind(&self.name, kind, token, ttl)
                    .await
            }
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

    /// Wraps a granted lease in a guard, registering it for renewal unless its TTL is fixed;
    /// `via` says how it was granted (the `via` label of `distlock_acquired_total`).
    pub(crate) fn grant(&self, lease: Lease, labels: &Labels, started: Instant, via: Via) -> Guard {
        let inner = &self.locker.inner;
        labels.acquired(via);
        labels.record(metric::ACQUIRE_WAIT_SECONDS, started.elapsed());
        let renew_ttl = match self.expiry {
            Expiry::Renewed(lease) => Some(lease),
            Expiry::Fixed(_) => None,
        };
        let held = Arc::new(Held::new(&lease, labels.clone(), renew_ttl, self.max_hold));
        if renew_ttl.is_some() {
            inner.renewer.watch(Arc::clone(&held));
        }
        let owner = inner
            .owners
            .enter(&self.name, &held)
            .map(|task| (Arc::clone(&inner.owners), task));
        Guard::new(
            self.locker.clone(),
            Arc::clone(&inner.lock),
            held,
            Arc::clone(&inner.waiters),
            owner,
        )
    }
}

/// Resolves when `watch` announces a release after generation `seen`; never without a watch.
pub(crate) async fn changed(watch: Option<&crate::ReleaseWatch>, seen: Option<u64>) {
    match (watch, seen) {
        (Some(watch), Some(seen)) => watch.signal().changed_since(seen).await,
        _ => std::future::pending().await,
    }
}

/// A wait that the clock cannot hold is a wait without a deadline.
fn deadline_free(wait: Duration) -> Option<Duration> {
    Instant::now().checked_add(wait).map(|_| wait)
}

impl Locker {
    /// A retryable backend failure while waiting: `Ok(error)` (logged, to retry) while the
    /// backend has been failing for less than `budget` in a row (`failing_since` marks the
    /// start of the run), `Err(error)` to return once it has failed that long. "The store is
    /// unreachable" is not "the lock is busy": it is bounded on its own, whatever the wait.
    pub(crate) fn retry_or_return(
        &self,
        name: &str,
        error: LockError,
        failing_since: &mut Option<Instant>,
        budget: Duration,
    ) -> Result<LockError, LockError> {
        let now = Instant::now();
        let since = *failing_since.get_or_insert(now);
        let failing_for = now.saturating_duration_since(since);
        if failing_for < budget {
            self.warn_retried(name, &error, failing_for);
            Ok(error)
        } else {
            Err(error)
        }
    }

    /// Logs a backend failure that a waiting request retries, at most once per
    /// [`WARN_EVERY`] for the whole locker, so an outage under a thousand waiters does not
    /// flood the log.
    fn warn_retried(&self, name: &str, error: &LockError, failing_for: Duration) {
        let now = Instant::now();
        let mut warned = self
            .inner
            .warned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if warned.is_none_or(|at| now.saturating_duration_since(at) >= WARN_EVERY) {
            *warned = Some(now);
            tracing::warn!(
                name,
                backend = self.backend(),
                %error,
                ?failing_for,
                budget = ?self.inner.retry_errors_for,
                "the lock backend fails; retrying while waiting"
            );
        }
    }
}

/// The `reason` label of a request that ended without the lock.
pub(crate) fn failure_reason(error: &LockError) -> &'static str {
    match error {
        LockError::InvalidInput { .. }
        | LockError::Unsupported { .. }
        | LockError::UpgradeRefused { .. }
        | LockError::PermitsMismatch { .. } => "invalid",
        LockError::Timeout {
            phase: TimeoutPhase::Wait,
            ..
        } => "timeout",
        LockError::Busy { .. } => "busy",
        LockError::QuorumNotReached { .. } => "quorum",
        _ => "error",
    }
}

/// Counts a request in the `distlock_waiters` gauge while it waits (also when cancelled).
struct Waiting(Labels);

impl Waiting {
    fn enter(labels: Labels) -> Self {
        labels.gauge(metric::WAITERS, 1.0);
        Self(labels)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.gauge(metric::WAITERS, -1.0);
    }
}

impl IntoFuture for LockRequest {
    type Output = Result<Guard, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    /// `request.await` is `request.acquire().await`.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.acquire())
    }
}
