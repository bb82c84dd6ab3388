//! The multi-lock: one guard over several mutexes, taken all or nothing.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use metrics::SharedString;

use super::handle::Locker;
use super::options::Options;
use super::pace::{changed, instrumented};
use super::stop::{Stop, stopped};
use crate::backend::{MultiAttempt, ReleaseWatch};
use crate::metric::{Labels, Via};
use crate::{Guard, LeaseWatch, LockError, TimeoutPhase};

/// The most names one multi-lock may take.
pub const MAX_MULTI: usize = 64;

/// A request for several mutexes at once, made by [`Locker::lock_all`](crate::Locker::lock_all):
/// the same options as a [`LockRequest`](crate::LockRequest) (lease, fixed TTL, wait, label, hold
/// cap), then [`acquire`](MultiRequest::acquire) (or `.await` it),
/// [`try_acquire`](MultiRequest::try_acquire) or [`run`](MultiRequest::run).
#[must_use = "a lock request does nothing until it is awaited"]
pub struct MultiRequest {
    locker: Locker,
    /// The names, sorted and without repeats: one global order for every multi-lock.
    names: Vec<Arc<str>>,
    /// The options of every name's lease.
    options: Options,
    /// The stop signal the request is tied to ([`MultiRequest::stop_on`]).
    stop: Stop,
}

impl MultiRequest {
    /// A request for `names`, with `locker`'s default options.
    pub(super) fn new(locker: &Locker, mut names: Vec<Arc<str>>) -> Self {
        names.sort();
        names.dedup();
        Self {
            locker: locker.clone(),
            names,
            options: locker.defaults(),
            stop: Stop::default(),
        }
    }

    /// The names this request takes, sorted, without repeats.
    #[must_use]
    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// A renewed lease of this length for every name; see
    /// [`LockRequest::lease`](crate::LockRequest::lease).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.options.set_lease(lease);
        self
    }

    /// A fixed TTL for every name, not renewed; see
    /// [`LockRequest::fixed_ttl`](crate::LockRequest::fixed_ttl).
    pub fn fixed_ttl(mut self, ttl: Duration) -> Self {
        self.options.set_fixed_ttl(ttl);
        self
    }

    /// Keep every name from a new grant for `delay` after the leases end by expiry; see
    /// [`LockRequest::lock_delay`](crate::LockRequest::lock_delay).
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.options.set_lock_delay(delay);
        self
    }

    /// Ties the request to a stop signal: when it fires, a wait is given up, and under
    /// [`run`](MultiRequest::run) the work is cancelled and every name released at once; see
    /// [`LockRequest::stop_on`](crate::LockRequest::stop_on).
    pub fn stop_on(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.stop.set(signal);
        self
    }

    /// How long to wait for all the names to be free at once; see
    /// [`LockRequest::wait`](crate::LockRequest::wait).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.options.set_wait(wait);
        self
    }

    /// Waits without a deadline; see
    /// [`LockRequest::wait_forever`](crate::LockRequest::wait_forever).
    pub fn wait_forever(mut self) -> Self {
        self.options.set_wait_forever();
        self
    }

    /// How long a failing backend is retried while waiting; see
    /// [`LockRequest::retry_errors_for`](crate::LockRequest::retry_errors_for).
    pub fn retry_errors_for(mut self, budget: Duration) -> Self {
        self.options.set_retry_errors_for(budget);
        self
    }

    /// The `lock` label of this request's metrics; see
    /// [`LockRequest::label`](crate::LockRequest::label).
    pub fn label(mut self, label: impl Into<SharedString>) -> Self {
        self.options.set_label(label.into());
        self
    }

    /// Stop renewing this long after the grant; see
    /// [`LockRequest::max_hold`](crate::LockRequest::max_hold).
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.options.set_max_hold(max_hold);
        self
    }

    /// How long before `valid_until` the work is told to stop (default: the locker's,
    /// [`LockerBuilder::stop_margin`](crate::LockerBuilder::stop_margin), a fifth of the
    /// lease): [`Guard::lost`](crate::Guard::lost) fires then unless a renewal moved it. Must be shorter than the
    /// lease, or the request fails with [`LockError::InvalidInput`](crate::LockError::InvalidInput).
    pub fn stop_margin(mut self, margin: Duration) -> Self {
        self.options.set_stop_margin(margin);
        self
    }

    /// Tries once: `Ok(None)` when any of the names is held by another holder (then none is
    /// taken). Names the current task holds already are nested, as for a single lock.
    ///
    /// # Errors
    /// As [`LockRequest::try_acquire`](crate::LockRequest::try_acquire).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped after the request was sent, whatever it may have acquired is
    /// released in the background.
    pub async fn try_acquire(self) -> Result<Option<MultiGuard>, LockError> {
        self.wait(Duration::ZERO)
            .acquire()
            .await
            .map(Some)
            .or_else(|error| match error {
                LockError::Timeout {
                    phase: TimeoutPhase::Wait,
                    ..
                } => Ok(None),
                error => Err(error),
            })
    }

    /// Acquires every name, all or nothing, waiting while any of them is held, until the wait
    /// runs out.
    ///
    /// Each attempt asks for all the names at once: on one Redis server (or names in one
    /// cluster slot) in one atomic script; elsewhere one after the other in the sorted order,
    /// giving back what was taken at the first busy name. So two multi-locks over overlapping
    /// sets never deadlock, and a waiting multi-lock holds none of its names. While a name is
    /// held, the request waits for that name's release announcement (or its holder's TTL, or
    /// the backoff), then tries them all again. Multi-lock requests do not queue in the
    /// process's first-in first-out lines; a guard they produce hands its names on to those
    /// lines' waiters when it is released, like any guard.
    ///
    /// The guard holds one lease per name, each renewed by the watchdog; losing any one of them
    /// is losing the guard ([`MultiGuard::lost`]).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for no names, more than [`MAX_MULTI`], or a bad name or TTL
    /// (nothing sent); otherwise as [`LockRequest::acquire`](crate::LockRequest::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any await point, whatever it may have acquired is released in
    /// the background.
    pub async fn acquire(mut self) -> Result<MultiGuard, LockError> {
        let mut stop = self.stop.take();
        let name = self.names.join(", ");
        tokio::select! {
            biased;
            () = stopped(&mut stop) => Err(LockError::Stopped { name }),
            result = self.acquire_unstopped() => result,
        }
    }

    /// [`acquire`](MultiRequest::acquire) without a stop signal.
    async fn acquire_unstopped(self) -> Result<MultiGuard, LockError> {
        let labels = self.labels();
        let span = tracing::debug_span!(
            "acquire_all",
            names = self.names.len(),
            backend = labels.backend,
            attempts = tracing::field::Empty,
            outcome = tracing::field::Empty
        );
        instrumented(span, &labels, async {
            let mut attempts = 0;
            let result = self.wait_for_all(&labels, &mut attempts).await;
            (result, attempts)
        })
        .await
    }

    /// Runs `work` holding every name: acquires them (as [`acquire`](MultiRequest::acquire)),
    /// runs the work with a [`LeaseWatch`] per name (in the sorted order), and releases them
    /// when it is done. If any lease is lost first, the work is cancelled and
    /// `Err(LockError::Lost)` names that lock.
    ///
    /// # Errors
    /// Those of [`acquire`](MultiRequest::acquire), [`LockError::Lost`],
    /// [`LockError::NotOwned`] when a release found a lease no longer ours, and
    /// [`LockError::Stopped`] when the [stop signal](MultiRequest::stop_on) fired.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the work is dropped and the locks released in the background.
    pub async fn run<F, Fut, T>(mut self, work: F) -> Result<T, LockError>
    where
        F: FnOnce(Vec<LeaseWatch>) -> Fut,
        Fut: Future<Output = T>,
    {
        let mut stop = self.stop.take();
        let names = self.names.join(", ");
        let guard = tokio::select! {
            biased;
            () = stopped(&mut stop) => return Err(LockError::Stopped { name: names }),
            guard = self.acquire_unstopped() => guard?,
        };
        let lost = guard.lost();
        let work = work(guard.guards.iter().map(Guard::lease_watch).collect());
        tokio::select! {
            biased;
            name = lost => {
                drop(guard);
                Err(LockError::Lost { name })
            }
            () = stopped(&mut stop) => {
                // The work is dropped here, before the releases are sent.
                if let Err(error) = guard.release().await {
                    tracing::debug!(%error, "the release on the stop signal failed");
                }
                Err(LockError::Stopped { name: names })
            }
            out = work => guard.release().await.map(|()| out),
        }
    }

    fn labels(&self) -> Labels {
        let backend = self.locker.backend();
        Labels::new(
            backend,
            "multi",
            self.options.label(),
            Labels::unlabelled_set(backend, "multi"),
        )
    }

    /// The checked input: the TTL each attempt asks for.
    fn check(&self) -> Result<Duration, LockError> {
        if self.names.is_empty() || self.names.len() > MAX_MULTI {
            return Err(LockError::invalid(format!(
                "a multi-lock takes 1 to {MAX_MULTI} names, not {}",
                self.names.len()
            )));
        }
        let mut ttl = Duration::ZERO;
        for name in &self.names {
            ttl = self.options.check(name)?;
        }
        self.options
            .check_lock_delay(self.locker.backend_lock().as_ref())?;
        Ok(ttl)
    }

    /// Names this task holds already are nested, as for a single lock: their nested guards,
    /// and the names left to take.
    fn nested(&self, labels: &Labels) -> Result<(Vec<Guard>, Vec<Arc<str>>), LockError> {
        let mut guards = Vec::with_capacity(self.names.len());
        let mut wanted = Vec::with_capacity(self.names.len());
        for name in &self.names {
            match self.locker.nested(name, crate::Kind::Mutex, labels)? {
                Some(nested) => guards.push(nested),
                None => wanted.push(Arc::clone(name)),
            }
        }
        Ok((guards, wanted))
    }

    async fn wait_for_all(
        &self,
        labels: &Labels,
        attempts: &mut u32,
    ) -> Result<MultiGuard, LockError> {
        let ttl = self.check()?;
        let locker = &self.locker;
        let (mut guards, wanted) = self.nested(labels)?;
        let mut pace = locker.pace(&self.options);
        // The subscription to the releases of the name found busy last, and its index.
        let mut watch: Option<(usize, ReleaseWatch)> = None;
        while !wanted.is_empty() {
            let seen = watch.as_ref().map(|(_, w)| w.signal().generation());
            *attempts = attempts.saturating_add(1);
            let (busy, holder_ttl, announces, failure) =
                match locker.attempt_all(&wanted, ttl, labels).await {
                    Ok(MultiAttempt::Acquired(leases)) => {
                        for lease in leases {
                            let name = Arc::clone(lease.shared_name());
                            let (started, options) = (pace.started(), &self.options);
                            guards.push(locker.grant(
                                &name,
                                lease,
                                labels,
                                started,
                                Via::Attempt,
                                options,
                            ));
                        }
                        break;
                    }
                    Ok(MultiAttempt::Busy {
                        index,
                        holder_ttl,
                        announces,
                    }) => {
                        pace.answered();
                        (Some(index), holder_ttl, announces, None)
                    }
                    Err(error) if error.is_retryable() => (None, None, false, Some(error)),
                    Err(error) => return Err(error),
                };
            let failure = pace.after_miss(&wanted[0], failure)?;
            // Listen for the busy name's releases (then try again at once: it may have been
            // released between the answer and the subscription).
            if let Some(index) = busy
                && watch.as_ref().is_none_or(|(watched, _)| *watched != index)
            {
                watch = None;
                if let Ok(Some(subscribed)) = locker.backend_lock().watch(&wanted[index]).await {
                    watch = Some((index, subscribed));
                    continue;
                }
            }
            let announced = watch.is_some() && announces && failure.is_none();
            let woken = changed(watch.as_ref().map(|(_, w)| w), seen);
            pace.before_next(*attempts, holder_ttl, announced, woken)
                .await;
        }
        guards.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(MultiGuard { guards })
    }
}

impl fmt::Debug for MultiRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiRequest")
            .field("names", &self.names)
            .field("options", &self.options)
            .field("stop_on", &self.stop.is_set())
            .finish()
    }
}

impl IntoFuture for MultiRequest {
    type Output = Result<MultiGuard, LockError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    /// `request.await` is `request.acquire().await`.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.acquire())
    }
}

/// Owns the leases of a multi-lock, one per name, until [`MultiGuard::release`] or drop
/// (which releases them in the background, like a [`Guard`]).
#[must_use = "dropping a MultiGuard releases its locks at once (in the background)"]
pub struct MultiGuard {
    /// One guard per name, sorted by name.
    guards: Vec<Guard>,
}

impl MultiGuard {
    /// The names held, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.guards.iter().map(Guard::name)
    }

    /// The fencing token of the lease on `name` (each name has its own); `None` for a name
    /// this guard does not hold.
    #[must_use]
    pub fn fencing_token(&self, name: &str) -> Option<u64> {
        self.guard(name).map(Guard::fencing_token)
    }

    /// The guard of one name.
    #[must_use]
    pub fn guard(&self, name: &str) -> Option<&Guard> {
        self.guards.iter().find(|guard| guard.name() == name)
    }

    /// The guards, one per name, sorted by name.
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    /// Whether every lease is still ours as far as this process knows.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(Guard::is_held)
    }

    /// Resolves, with its name, when any of the leases is lost while the guard lives (losing
    /// one is losing the guard).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn lost(&self) -> impl Future<Output = String> + Send + 'static {
        let each: Vec<_> = self
            .guards
            .iter()
            .map(|guard| {
                let (lost, name) = (guard.lost(), guard.name().to_owned());
                Box::pin(async move {
                    lost.await;
                    name
                })
            })
            .collect();
        async move { futures::future::select_all(each).await.0 }
    }

    /// Releases every lease now, all at once. `Ok(())` if each was still ours.
    ///
    /// # Errors
    /// The first failure among the releases, as [`Guard::release`] reports it (the others are
    /// released all the same).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the answers, the releases are finished in the background.
    pub async fn release(self) -> Result<(), LockError> {
        let answers = futures::future::join_all(self.guards.into_iter().map(Guard::release)).await;
        answers.into_iter().collect()
    }

    /// The guards, one per name, sorted by name, to release or keep one by one.
    pub fn into_guards(self) -> Vec<Guard> {
        self.guards
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.guards).finish()
    }
}
