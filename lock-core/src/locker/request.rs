//! A request for one lock: its options, then one try, a bounded wait, or work run under it.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use metrics::SharedString;
use tokio::time::Instant;
use tracing::Instrument;

use super::handle::{Ask, Locker, single_try};
use super::line::Line;
use super::options::Options;
use super::pace::{failure_reason, instrumented, report};
use super::stop::{Stop, stopped};
use crate::backend::Attempt;
use crate::metric::{Labels, Via};
use crate::{Guard, Kind, LeaseWatch, LockError, MAX_PERMITS, check_name};

/// A request for one lock, made by [`Locker::lock`], [`Locker::read`], [`Locker::write`] or
/// [`Locker::semaphore`]: choose how the lease ends
/// ([`lease`](LockRequest::lease), renewed, the default; or [`fixed_ttl`](LockRequest::fixed_ttl)),
/// the wait and the metrics label, then [`acquire`](LockRequest::acquire) (or `.await` it),
/// [`try_acquire`](LockRequest::try_acquire) or [`run`](LockRequest::run).
#[must_use = "a lock request does nothing until it is awaited"]
pub struct LockRequest {
    locker: Locker,
    name: Arc<str>,
    kind: Kind,
    /// A builder method that does not fit the kind (`permits` on a mutex), reported by
    /// `check` as invalid input.
    misuse: Option<&'static str>,
    options: Options,
    /// The stop signal the request is tied to ([`LockRequest::stop_on`]).
    stop: Stop,
    /// What the waiter says about itself while it waits ([`LockRequest::describe_waiter`]).
    waiter: Option<Arc<[u8]>>,
}

impl LockRequest {
    /// A request for `name` of `kind`, with `locker`'s default options.
    pub(super) fn new(locker: &Locker, name: Arc<str>, kind: Kind) -> Self {
        Self {
            locker: locker.clone(),
            name,
            kind,
            misuse: None,
            options: locker.defaults(),
            stop: Stop::default(),
            waiter: None,
        }
    }

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
            .backend_lock()
            .as_ref()
            .permits_in_use(&self.name)
            .await?;
        Ok(max.saturating_sub(in_use))
    }

    /// A renewed lease of this length (default: the locker's,
    /// [`LockerBuilder::lease`](crate::LockerBuilder::lease)): the watchdog extends it to `lease`
    /// from now every third of it while the guard lives, so the lock outlives any work, and a
    /// crashed holder's lock is free at most `lease` after the crash. The choice for work of
    /// unknown length. Between [`MIN_TTL`](crate::MIN_TTL) and [`MAX_TTL`](crate::MAX_TTL).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.options.set_lease(lease);
        self
    }

    /// A fixed TTL, **not renewed**: the lock expires `ttl` after the grant unless extended by
    /// hand ([`Guard::extend`]), and [`Guard::lost`] fires then, whether the work is done or
    /// not. The choice for work with a known bound, or for a lock that must end by itself
    /// (ShedLock's "lock at most for"). Between [`MIN_TTL`](crate::MIN_TTL) (1 ms) and
    /// [`MAX_TTL`](crate::MAX_TTL); sub-millisecond parts are dropped.
    pub fn fixed_ttl(mut self, ttl: Duration) -> Self {
        self.options.set_fixed_ttl(ttl);
        self
    }

    /// **Lock-delay** (Chubby's, and Consul's session `LockDelay`): when a lease of this request
    /// ends by *expiry* — its holder crashed, hung or was cut off, so its renewals stopped —
    /// the store keeps the name from any new grant for `delay` more; a release (or a hand-over
    /// to a local waiter) frees it at once, as without it. The holder's validity is unchanged
    /// ([`Lease::valid_until`](crate::Lease::valid_until) and [`Guard::lost`] are those of the
    /// lease alone), so a failed holder's requests still in flight to a store that checks no
    /// fencing tokens land before anyone else holds the lock (Burrows, "The Chubby lock service
    /// for loosely-coupled distributed systems", OSDI 2006, §2.4).
    ///
    /// Written once in the [`Locker`]: every TTL sent to the store (the grant, each renewal,
    /// [`Guard::extend`]) is the lease plus `delay`, and the guard's validity is the lease's.
    /// Other clients of the name (`distlock show`, redis-py) see the longer TTL. Default zero.
    /// The lease plus the delay must be at most [`MAX_TTL`](crate::MAX_TTL).
    ///
    /// # Errors (of the request)
    /// [`LockError::Unsupported`] on a backend whose locks end with their holder's connection
    /// (PostgreSQL's and MySQL's advisory locks: `Capabilities::lock_delay` is `false`),
    /// before any I/O; [`LockError::InvalidInput`] when the lease plus the delay is too long.
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.options.set_lock_delay(delay);
        self
    }

    /// How long [`acquire`](LockRequest::acquire) waits for a held lock before giving up with
    /// [`LockError::Timeout`]. `Duration::ZERO` makes one attempt. A wait too long for the
    /// clock (`Duration::MAX`) is [`wait_forever`](LockRequest::wait_forever).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.options.set_wait(wait);
        self
    }

    /// Waits without a deadline: [`acquire`](LockRequest::acquire) returns when the lock is
    /// granted, when the request is dropped (put it in a `tokio::select!` or a
    /// `tokio::time::timeout` to stop it), or when the backend keeps failing for longer than
    /// [`retry_errors_for`](LockRequest::retry_errors_for). For a worker that must eventually
    /// run.
    pub fn wait_forever(mut self) -> Self {
        self.options.set_wait_forever();
        self
    }

    /// How long [`acquire`](LockRequest::acquire) retries a backend that keeps failing with
    /// retryable errors (Redis down or restarting, a dropped connection) before it returns the last
    /// error, however long the wait (default: the locker's,
    /// [`DEFAULT_RETRY_ERRORS_FOR`](crate::DEFAULT_RETRY_ERRORS_FOR)). The clock restarts whenever
    /// the backend answers. Each retried failure is logged at `warn` (at most once a second per
    /// locker).
    pub fn retry_errors_for(mut self, budget: Duration) -> Self {
        self.options.set_retry_errors_for(budget);
        self
    }

    /// The `lock` label of this request's metrics: the name's *template* (`"order:{id}"`), not
    /// the rendered name, so the number of series stays bounded. Default `"unlabelled"`.
    pub fn label(mut self, label: impl Into<SharedString>) -> Self {
        self.options.set_label(label.into());
        self
    }

    /// For a renewed lease: stop renewing this long after the grant; see
    /// [`LockerBuilder::max_hold`](crate::LockerBuilder::max_hold).
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.options.set_max_hold(max_hold);
        self
    }

    /// How long before `valid_until` the work is told to stop (default: the locker's,
    /// [`LockerBuilder::stop_margin`](crate::LockerBuilder::stop_margin), a fifth of the
    /// lease): [`Guard::lost`] fires then unless a renewal moved it. Must be shorter than the
    /// lease, or the request fails with [`LockError::InvalidInput`].
    pub fn stop_margin(mut self, margin: Duration) -> Self {
        self.options.set_stop_margin(margin);
        self
    }

    /// Makes the granted lease **revocable** (Curator's `makeRevocable`): another process may
    /// ask its holder to give the lock up with [`Locker::revoke`] (or `distlock revoke`), and
    /// [`Guard::revoked`] fires then; the holder decides what to do (a holder that ignores it
    /// keeps the lock). The request is seen within milliseconds where the backend announces
    /// releases (the revoker rings a bell the lease listens to: Redis, PostgreSQL with its
    /// listener, etcd), else at the lease's next renewal (every third of the lease); a fixed
    /// TTL is never renewed, so never told. One more read of the store per renewal (and a
    /// subscription where releases are announced), which is why it is not the default.
    ///
    /// # Errors (of the request)
    /// [`LockError::Unsupported`] (kind `"revocation"`) on a backend that does not describe
    /// its holders or whose fencing tokens are not ordered, before any I/O.
    pub fn revocable(mut self) -> Self {
        self.options.set_revocable(true);
        self
    }

    /// **Waiters by name**: while this request waits, the store keeps `description` (a
    /// note: the JSON of host, pid, note and since that `distlock run` writes, or any bytes up
    /// to [`MAX_NOTE_BYTES`](crate::MAX_NOTE_BYTES)) under a record of its own, so operators
    /// see who waits for the name, not only how many (`distlock show`, `/api/locks`, the
    /// console). The record is written once the request has waited
    /// [`VISIBLE_AFTER`](crate::VISIBLE_AFTER) (a request granted at once costs nothing
    /// more), renewed every 2 s while it waits, and released when the wait ends (a waiter that
    /// died is listed at most 6 s longer). Its name is `NAME:distlock-waiter:ID`
    /// ([`waiter_record_of`](crate::waiter_record_of) tells it).
    ///
    /// # Errors (of the request)
    /// [`LockError::Unsupported`] (kind `"waiter description"`) on a backend that keeps no
    /// notes (advisory locks, a Redlock whose nodes do not), and
    /// [`LockError::InvalidInput`] for a description over the note's limit or a name too
    /// long for the record's suffix, before any I/O.
    pub fn describe_waiter(mut self, description: impl Into<Arc<[u8]>>) -> Self {
        self.waiter = Some(description.into());
        self
    }

    /// Ties the request to a stop signal, such as the process's [`shutdown`](crate::shutdown)
    /// (client-go's `ReleaseOnCancel`): when `signal` resolves, a wait for the lock is given
    /// up, and under [`run`](LockRequest::run) the work is cancelled and the lock **released at
    /// once** — the next holder, in this process or another, is granted it within a round trip
    /// or two instead of a lease later. Either way the request answers
    /// [`LockError::Stopped`]. A [`Guard`] from [`acquire`](LockRequest::acquire) is not tied
    /// (release it yourself: `tokio::select!` on the signal).
    ///
    /// ```no_run
    /// # async fn job(locker: lock_core::Locker) -> Result<(), lock_core::LockError> {
    /// locker
    ///     .lock("nightly-report")
    ///     .stop_on(lock_core::shutdown())
    ///     .run(|_lease| async { /* ... */ })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn stop_on(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.stop.set(signal);
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
        let once = async {
            let result = self.try_once(&labels).await;
            let outcome = match &result {
                Ok(Some(_)) => "acquired",
                Ok(None) => "busy",
                Err(error) => failure_reason(error),
            };
            report(&labels, outcome, None);
            result
        };
        // A span no subscriber wants is not entered and left on every poll: with `tracing`'s
        // `log` feature on (sqlx turns it on), each of those asks the `log` fallback again
        // (~500 client instructions a cycle; scripts/client-cost.sh).
        if span.is_disabled() {
            once.await
        } else {
            once.instrument(span).await
        }
    }

    /// Acquires the lock, waiting for it while another holder has it, until the wait runs out.
    ///
    /// Waiters of one process for one name queue first-in first-out and only the first contends. It
    /// is woken by the release: at once when the holder is in this process, by the backend's
    /// release announcement otherwise (Redis pub/sub; see
    /// [`Lock::watch`](crate::backend::Lock::watch)), and in any case when the holder's TTL runs
    /// out, so a lost announcement costs latency, never liveness. A backend that announces nothing
    /// is polled with the locker's [`Backoff`](crate::Backoff) (exponential, full jitter), never
    /// longer than the holder's remaining TTL.
    ///
    /// A holder that never announces its release (another client on the same name: redis-py,
    /// node-redlock, redsync) is polled with the [`Backoff`](crate::Backoff), so a release there is
    /// noticed within the backoff's ceiling (100 ms by default); see
    /// [`Attempt::Busy`](crate::backend::Attempt::Busy).
    ///
    /// **Reentrancy**: if the current tokio task already holds this name through this locker,
    /// the answer is at once a *nested* guard on the same lease (the request's TTL is ignored);
    /// the lease is released when the outermost guard is. Other tasks — including tasks this
    /// one spawns — wait as usual. Outside a tokio task there is no reentrancy: the future that
    /// `#[tokio::main]` or `Runtime::block_on` drives is not a task, so code there that asks
    /// again for a name it holds waits for itself (until its wait runs out).
    ///
    /// # Errors
    /// [`LockError::Timeout`] with [`TimeoutPhase::Wait`](crate::TimeoutPhase::Wait) when the lock
    /// was still held at the deadline; [`LockError::InvalidInput`] for a bad name or TTL (nothing
    /// sent). Backend errors that [`LockError::is_retryable`] (Redis restarting, a dropped
    /// connection) are retried for [`retry_errors_for`](LockRequest::retry_errors_for) in a row (or
    /// until the deadline, if sooner), then the last one is returned; others
    /// ([`LockError::WrongType`], a wrong password) are returned at once.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any await point, whatever it may have acquired is released in the
    /// background.
    pub async fn acquire(mut self) -> Result<Guard, LockError> {
        match self.stop.take() {
            None => self.acquire_unstopped().await,
            Some(mut signal) => {
                let name = self.name.to_string();
                tokio::select! {
                    biased;
                    () = signal.as_mut() => Err(LockError::Stopped { name }),
                    result = self.acquire_unstopped() => result,
                }
            }
        }
    }

    /// [`acquire`](LockRequest::acquire) without a stop signal.
    async fn acquire_unstopped(self) -> Result<Guard, LockError> {
        let labels = self.labels();
        let span = tracing::debug_span!(
            "acquire",
            name = %self.name,
            backend = labels.backend,
            kind = labels.kind,
            attempts = tracing::field::Empty,
            outcome = tracing::field::Empty
        );
        instrumented(span, &labels, async {
            let mut attempts = 0;
            let waiting = self.wait_for_grant(&labels, &mut attempts);
            let result = match &self.waiter {
                None => waiting.await,
                Some(description) => {
                    let lock = self.locker.backend_lock();
                    super::visible::while_waiting(
                        lock,
                        &self.name,
                        Arc::clone(description),
                        waiting,
                    )
                    .await
                }
            };
            (result, attempts)
        })
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
    /// Those of [`acquire`](LockRequest::acquire), [`LockError::Lost`],
    /// [`LockError::NotOwned`], and [`LockError::Stopped`] when the [stop
    /// signal](LockRequest::stop_on) fired (the work cancelled, the lock released).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the work is dropped and the lock released in the background.
    pub async fn run<F, Fut, T>(mut self, work: F) -> Result<T, LockError>
    where
        F: FnOnce(LeaseWatch) -> Fut,
        Fut: Future<Output = T>,
    {
        let mut stop = self.stop.take();
        let name = self.name.to_string();
        let guard = tokio::select! {
            biased;
            () = stopped(&mut stop) => return Err(LockError::Stopped { name }),
            guard = self.acquire_unstopped() => guard?,
        };
        let lost = guard.lost();
        let work = work(guard.lease_watch());
        tokio::select! {
            biased;
            () = lost => {
                drop(guard);
                Err(LockError::Lost { name })
            }
            () = stopped(&mut stop) => {
                // The work is dropped here, before the release is sent.
                if let Err(error) = guard.release().await {
                    tracing::debug!(%error, "the release on the stop signal failed");
                }
                Err(LockError::Stopped { name })
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
        self.locker.labels(self.kind, self.options.label())
    }

    /// The checked input: the TTL each attempt asks for.
    fn check(&self) -> Result<Duration, LockError> {
        if let Some(misuse) = self.misuse {
            return Err(LockError::invalid(misuse));
        }
        let ttl = self.options.check(&self.name)?;
        let lock = self.locker.backend_lock().as_ref();
        self.options.check_lock_delay(lock)?;
        if self.options.revocable() {
            super::revoke::check_revocable(lock)?;
        }
        if let Some(description) = &self.waiter {
            super::visible::check(lock, &self.name, description)?;
        }
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

    /// One try: a nested guard if the task holds the name already, `None` while waiters of
    /// this process queue for it, otherwise one attempt.
    async fn try_once(&self, labels: &Labels) -> Result<Option<Guard>, LockError> {
        let started = Instant::now();
        let locker = &self.locker;
        let ttl = self.check()?;
        if locker.holds_already(&self.name, self.kind) {
            return locker.nested(&self.name, self.kind, labels);
        }
        // Waiters of this process are ahead of a single try: it does not jump the line.
        if locker.has_local_waiters(&self.name, self.kind.class()) {
            return Ok(None);
        }
        let attempt = locker
            .attempt(
                &self.name,
                single_try(self.kind),
                Ask {
                    ttl,
                    renewed: self.options.renewal().is_some(),
                },
                labels,
                &mut None,
                started,
            )
            .await?;
        Ok(match attempt {
            Attempt::Acquired(lease) => Some(locker.grant(
                &self.name,
                lease,
                labels,
                started,
                Via::Attempt,
                &self.options,
            )),
            Attempt::Busy { .. } => None,
        })
    }

    /// Waits for the grant: at once a nested guard if the task holds the name already,
    /// otherwise in this process's line for the name.
    async fn wait_for_grant(
        &self,
        labels: &Labels,
        attempts: &mut u32,
    ) -> Result<Guard, LockError> {
        let ttl = self.check()?;
        if let Some(nested) = self.locker.nested(&self.name, self.kind, labels)? {
            return Ok(nested);
        }
        Line::new(&self.locker, &self.name, self.kind, &self.options)
            .wait(ttl, labels, attempts)
            .await
    }
}

impl fmt::Debug for LockRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("LockRequest");
        out.field("locker", &self.locker)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("misuse", &self.misuse)
            .field("stop_on", &self.stop.is_set())
            .field("describes_waiter", &self.waiter.is_some());
        self.options.debug_fields(&mut out);
        out.finish()
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
