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
use crate::metric::{self, Labels, Via};
use crate::owners::Owners;
use crate::renewal::Renewer;
use crate::waiters::Waiters;
use crate::{
    Attempt, Backoff, Guard, Lease, LeaseWatch, Lock, LockError, TimeoutPhase, Token, check_name,
    check_ttl,
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
    /// The metrics labels of requests without a label, built once.
    unlabelled: &'static crate::metric::Fixed,
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

    /// Starts a request for the lock `name`; nothing is sent until it is awaited.
    ///
    /// `locker.lock(name).await` is `locker.lock(name).acquire().await`.
    pub fn lock(&self, name: impl Into<Arc<str>>) -> LockRequest {
        LockRequest {
            locker: self.clone(),
            name: name.into(),
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
                unlabelled: Labels::unlabelled_set(self.lock.backend()),
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

/// A request for one lock, made by [`Locker::lock`]: choose how the lease ends
/// ([`lease`](LockRequest::lease), renewed, the default; or [`fixed_ttl`](LockRequest::fixed_ttl)),
/// the wait and the metrics label, then [`acquire`](LockRequest::acquire) (or `.await` it),
/// [`try_acquire`](LockRequest::try_acquire) or [`run`](LockRequest::run).
#[must_use = "a lock request does nothing until it is awaited"]
#[derive(Debug)]
pub struct LockRequest {
    locker: Locker,
    name: Arc<str>,
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
        let span = tracing::debug_span!("acquire", name = %self.name, backend = labels.backend, attempts = 1, outcome = tracing::field::Empty);
        async {
            let started = Instant::now();
            let result = match self.check() {
                Ok(_) if self.holds_already() => Ok(self.nested(&labels)),
                // Waiters of this process are ahead of a single try: it does not jump the line.
                Ok(_) if self.locker.inner.waiters.has_waiters(&self.name) => Ok(None),
                Ok(ttl) => self
                    .attempt(ttl, &labels)
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

    fn labels(&self) -> Labels {
        Labels::new(
            self.locker.backend(),
            self.label.clone(),
            self.locker.inner.unlabelled,
        )
    }

    /// The checked input: the TTL each attempt asks for.
    fn check(&self) -> Result<Duration, LockError> {
        check_name(&self.name)?;
        let ttl = self.expiry.ttl();
        check_ttl(ttl)?;
        Ok(ttl)
    }

    /// Whether the current task already holds this name through this locker.
    fn holds_already(&self) -> bool {
        self.locker.inner.owners.current(&self.name).is_some()
    }

    /// A nested guard if the current task already holds this name through this locker, counted
    /// as acquired `via="reentry"`.
    fn nested(&self, labels: &Labels) -> Option<Guard> {
        let inner = &self.locker.inner;
        let held = inner.owners.current(&self.name)?;
        labels.acquired(Via::Reentry);
        Some(Guard::nested(Arc::clone(&inner.lock), held))
    }

    async fn wait_for_grant(
        &self,
        labels: &Labels,
        attempts: &mut u32,
    ) -> Result<Guard, LockError> {
        let ttl = self.check()?;
        if let Some(nested) = self.nested(labels) {
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
        let ticket = inner.waiters.join(&self.name, ttl);
        let mut waiting = None;
        let mut tried_watch = false;
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
            *attempts = attempts.saturating_add(1);
            // A transient backend failure (connection dropped, server restarting) is retried
            // like a busy lock, within the same wait; the caller sees it if it outlasts the wait.
            let (holder_ttl, announces, failure) = match self.attempt(ttl, labels).await {
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
                    (holder_ttl, announces, None)
                }
                Err(error) if error.is_retryable() => (None, false, Some(error)),
                Err(error) => return Err(error),
            };
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Err(failure.unwrap_or_else(timed_out));
            }
            if let Some(error) = &failure {
                // "The store is unreachable" is not "the lock is busy": bounded on its own.
                let since = *failing_since.get_or_insert(now);
                let failing_for = now.saturating_duration_since(since);
                if failing_for < self.retry_errors_for {
                    self.locker.warn_retried(&self.name, error, failing_for);
                } else if let Some(error) = failure {
                    return Err(error);
                }
            }
            waiting.get_or_insert_with(|| Waiting::enter(labels.clone()));
            // Subscribe to the name's releases once per line, then try again at once: a
            // release may have landed between the busy answer and the subscription.
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
            let remote_released = async {
                match (&signals.remote, remote_seen) {
                    (Some(watch), Some(seen)) => watch.signal().changed_since(seen).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                () = signals.local.changed_since(local_seen) => {}
                () = remote_released => {}
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One attempt with a fresh token. Until the backend has answered, a release of that token
    /// is armed: if the attempt is cancelled or fails in a way that may have reached the
    /// backend, the token is released in the background, so nothing is left behind.
    async fn attempt(&self, ttl: Duration, labels: &Labels) -> Result<Attempt, LockError> {
        let lock = &self.locker.inner.lock;
        let token = Token::generate()?;
        let pending = ReleaseOnDrop::new(
            Arc::clone(lock),
            Lease::new(Arc::clone(&self.name), token, 0, Instant::now()),
        );
        labels.count(metric::ACQUIRE_ATTEMPTS_TOTAL);
        let result = lock.as_ref().try_acquire(&self.name, token, ttl).await;
        match &result {
            Err(error) if error.may_have_applied() => {
                labels.count_with(metric::BACKEND_ERRORS_TOTAL, "op", "acquire");
                drop(pending);
            }
            _ => pending.disarm(),
        }
        result
    }

    /// Wraps a granted lease in a guard, registering it for renewal unless its TTL is fixed;
    /// `via` says how it was granted (the `via` label of `distlock_acquired_total`).
    fn grant(&self, lease: Lease, labels: &Labels, started: Instant, via: Via) -> Guard {
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
            Arc::clone(&inner.lock),
            held,
            Arc::clone(&inner.waiters),
            owner,
        )
    }
}

/// A wait that the clock cannot hold is a wait without a deadline.
fn deadline_free(wait: Duration) -> Option<Duration> {
    Instant::now().checked_add(wait).map(|_| wait)
}

impl Locker {
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
fn failure_reason(error: &LockError) -> &'static str {
    match error {
        LockError::InvalidInput { .. } => "invalid",
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
