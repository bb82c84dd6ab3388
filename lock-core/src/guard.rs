//! The RAII owner of a lease.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Lock;
use crate::metric;
use crate::runtime::cleanup::ReleaseOnDrop;
use crate::runtime::handoff::end_lease;
use crate::runtime::held::HeldLease;
use crate::runtime::owners::Owners;
use crate::runtime::renewal::Renewer;
use crate::runtime::waiters::Waiters;
use crate::{Lease, LockError, check_ttl};

/// Owns a granted lease until [`Guard::release`], [`Guard::leak`] or drop.
///
/// Prefer `guard.release().await?`: it fails with [`LockError::NotOwned`] when the lease was
/// no longer ours when it was released. Dropping the guard also releases, but **not immediately**: the release is spawned
/// on the current tokio runtime and runs when the runtime gets to it (like sqlx's
/// `PgAdvisoryLockGuard`). Dropped outside a runtime, nothing is sent and the lock expires at the
/// end of its TTL.
///
/// A guard taken without a fixed TTL is *renewed*: the locker's watchdog extends its lease
/// every third of the lease while the guard lives, and stops before the release is sent. The
/// guard keeps its `Locker`'s watchdog alive, so dropping every handle to the locker does not
/// stop the renewal. A
/// guard with a fixed TTL is not renewed. Either way the lease can end early — the backend lost
/// it, renewal failed for longer than the lease — and [`Guard::lost`] resolves then. Hand
/// [`Guard::fencing_token`] to the resource you protect so it can reject a stale holder.
#[must_use = "dropping a Guard releases the lock at once (in the background)"]
pub struct Guard {
    lock: Arc<dyn Lock>,
    held: Arc<HeldLease>,
    /// Whether dropping the guard must release the lease (false after `release` and `leak`, and
    /// for nested guards, which never release).
    armed: bool,
    /// `None` for a nested guard: it shares the outer guard's lease and releases nothing.
    outer: Option<Outer>,
}

/// What the outermost guard of a lease keeps to tell others when it is done.
struct Outer {
    waiters: Arc<Waiters>,
    owner: Option<(Arc<Owners>, tokio::task::Id)>,
    /// The watchdog of the locker that granted the lease, kept alive with the guard: it renews
    /// the lease, and would stop if the last `Locker` handle were dropped first.
    _renewer: Arc<Renewer>,
}

impl Guard {
    pub(crate) fn new(
        renewer: Arc<Renewer>,
        lock: Arc<dyn Lock>,
        held: Arc<HeldLease>,
        waiters: Arc<Waiters>,
        owner: Option<(Arc<Owners>, tokio::task::Id)>,
    ) -> Self {
        // Counted in `distlock_held` by the grant (`Labels::granted`), with its other series.
        Self {
            lock,
            held,
            armed: true,
            outer: Some(Outer {
                waiters,
                owner,
                _renewer: renewer,
            }),
        }
    }

    /// A guard on a lease the current task already holds (reentrancy): it releases nothing.
    pub(crate) fn nested(lock: Arc<dyn Lock>, held: Arc<HeldLease>) -> Self {
        Self {
            lock,
            held,
            armed: false,
            outer: None,
        }
    }

    /// The shared state of the lease (for the waiting line, which follows its renewals).
    pub(crate) fn held(&self) -> &Arc<HeldLease> {
        &self.held
    }

    /// Whether this is a nested guard: one the task got by asking again for a name it already
    /// held. Releasing or dropping it does nothing; the outermost guard releases the lease.
    #[must_use]
    pub fn is_nested(&self) -> bool {
        self.outer.is_none()
    }

    /// A snapshot of the lease this guard owns (its `valid_until` as of now).
    #[must_use]
    pub fn lease(&self) -> Lease {
        self.held.lease()
    }

    /// The lock name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.held.name()
    }

    /// What this guard holds: the mutex, a read share, the write lock, or permits.
    #[must_use]
    pub fn kind(&self) -> crate::Kind {
        self.held.kind()
    }

    /// The fencing token of this grant; see [`Lease::fencing_token`].
    #[must_use]
    pub fn fencing_token(&self) -> u64 {
        self.held.fencing_token()
    }

    /// What a write to the protected resource carries: the lock name as the resource and this
    /// grant's fencing token. Hand it to the store's fence (`distlock_fence` in PostgreSQL,
    /// `distlock_fenced_set` in Redis); see [`Fence`](crate::Fence).
    #[must_use]
    pub fn fence(&self) -> crate::Fence {
        crate::Fence::new(self.held.name(), self.held.fencing_token())
    }

    /// The local monotonic instant after which the lease must be assumed gone; moved forward by
    /// every renewal and [`Guard::extend`].
    #[must_use]
    pub fn valid_until(&self) -> Instant {
        self.held.valid_until()
    }

    /// Time left until [`Guard::valid_until`], zero once it has passed.
    #[must_use]
    pub fn remaining(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Whether the lease is still ours to work under as far as this process knows: not lost,
    /// its stop point ([`Guard::stop_at`]) not passed. (Another process can only know better
    /// after the fact: use fencing.)
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// How long before [`Guard::valid_until`] the work is told to stop: the request's
    /// [`stop_margin`](crate::LockRequest::stop_margin), by default a fifth of the lease.
    #[must_use]
    pub fn stop_margin(&self) -> Duration {
        self.held.stop_margin()
    }

    /// When [`Guard::lost`] fires unless a renewal moves it: `valid_until - stop_margin`.
    #[must_use]
    pub fn stop_at(&self) -> Instant {
        self.held.stop_at()
    }

    /// Whether the lease is *at risk*: its last renewal failed (the backend was unreachable or
    /// slow) and none has succeeded since, but it is not lost yet. The watchdog keeps retrying
    /// until the stop point; a success ends the risk.
    #[must_use]
    pub fn is_at_risk(&self) -> bool {
        self.held.is_at_risk()
    }

    /// A future that resolves when the lease becomes at risk (a renewal failed while the lease
    /// was still valid; see [`Guard::is_at_risk`]) or is lost, whichever comes first: the
    /// moment to checkpoint, or to stop taking new work, before [`Guard::lost`] cancels it.
    /// Counted in `distlock_at_risk_total`. It stays pending while renewals succeed.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn at_risk(&self) -> impl Future<Output = ()> + Send + 'static {
        Arc::clone(&self.held).at_risk()
    }

    /// Whether the watchdog is renewing this lease.
    #[must_use]
    pub fn is_renewing(&self) -> bool {
        self.held.is_renewing()
    }

    /// A future that resolves when the lease is lost while this guard lives: renewal found the
    /// lock no longer ours, the backend saw its key deleted or overwritten by someone else (at
    /// once, where the backend watches keys: [`Lock::watch_loss`](crate::backend::Lock::watch_loss),
    /// Redis and Valkey), or the lease's stop point ([`Guard::stop_at`], `valid_until` minus
    /// the [stop margin](Guard::stop_margin)) passed without a renewal moving it — renewals
    /// failing until then, or a fixed TTL running towards its end. So it fires while the lease
    /// is still valid for the stop margin, leaving the work that long to stop (client-go's
    /// RenewDeadline below LeaseDuration). It stays pending while the lease is held. Owns what it needs, so it
    /// can be awaited beside work that uses the guard (`tokio::select!`).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        Arc::clone(&self.held).lost()
    }

    /// Resolves when another process asks this holder to give the lock up
    /// ([`Locker::revoke`](crate::Locker::revoke)), for a
    /// [revocable](crate::LockRequest::revocable) request; or when the lease is lost (it can
    /// be revoked no more: see [`Guard::is_revoked`]). The holder decides: release the guard
    /// (counted as honoured), or carry on and keep the lock.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn revoked(&self) -> impl Future<Output = ()> + Send + 'static {
        Arc::clone(&self.held).revoked()
    }

    /// Whether another process asked this holder to give the lock up.
    #[must_use]
    pub fn is_revoked(&self) -> bool {
        self.held.is_revoked()
    }

    /// Why the holder was asked to give the lock up, if the revoker said.
    #[must_use]
    pub fn revocation_note(&self) -> Option<Arc<str>> {
        self.held.revocation_note()
    }

    /// A cheap, cloneable view of this lease for code that must not own the guard (the work
    /// passed to [`LockRequest::run`](crate::LockRequest::run)).
    #[must_use]
    pub fn lease_watch(&self) -> LeaseWatch {
        LeaseWatch {
            held: Arc::clone(&self.held),
        }
    }

    /// Extends the lease so it expires `ttl` from now, if it is still ours (in the store, `ttl`
    /// plus the request's [`lock_delay`](crate::LockRequest::lock_delay)).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a TTL out of range, or whose sum with the lock-delay is
    /// (nothing sent);
    /// [`LockError::NotOwned`] when the lease already expired (the current holder, if any, is
    /// left intact; the guard counts as lost); [`LockError::Timeout`] / [`LockError::Backend`]
    /// when the backend fails — the lease is then unchanged or extended, and `valid_until` is
    /// not moved.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the lease is unchanged or extended and the guard still owns it
    /// (with the old `valid_until`, which is the safe side).
    pub async fn extend(&mut self, ttl: Duration) -> Result<(), LockError> {
        check_ttl(ttl)?;
        // With a lock-delay the store keeps the name that much longer than the holder's TTL.
        let stored = self.held.store_ttl(ttl);
        check_ttl(stored)?;
        let _op = self.held.op().await;
        match self.lock.as_ref().extend(&self.held.lease(), stored).await {
            Ok(Some(valid_until)) => {
                self.held.set_valid_until(valid_until);
                Ok(())
            }
            Ok(None) => {
                self.held.mark_lost();
                self.owned_or_error(false)
            }
            Err(error) => {
                self.held
                    .labels()
                    .count_with(metric::BACKEND_ERRORS_TOTAL, "op", "extend");
                Err(error)
            }
        }
    }

    /// Releases the lease now: stops its renewal, waits for a renewal in flight, then sends the
    /// release. `Ok(())` if the lease was still ours up to the release.
    ///
    /// A lease that was no longer ours is an error, not a quiet `false`: it means the critical
    /// section ran (at least at its end) without the lock, and `guard.release().await?` must not
    /// pass over that. For a nested guard nothing is sent: it answers whether the shared lease
    /// is still held.
    ///
    /// # Errors
    /// [`LockError::NotOwned`] when the lease had expired or was taken before the release (the
    /// key was left to whoever holds it now), as [`Guard::extend`] reports it; also when its
    /// validity passed under a [`lock_delay`](crate::LockRequest::lock_delay): nothing is sent
    /// then, and the store frees the name at the delay's end;
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the backend fails; the lock then
    /// expires at the end of its TTL.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the answer, the release is finished in the background.
    pub async fn release(mut self) -> Result<(), LockError> {
        if self.is_nested() {
            return self.owned_or_error(self.held.is_held());
        }
        self.armed = false;
        self.finish();
        if self.held.is_revoked() {
            crate::runtime::revocation::honoured(self.held.labels());
        }
        let _op = self.held.op().await;
        if self.held.kept_by_lock_delay() {
            self.held.labels().count(metric::RELEASE_NOT_OWNED_TOTAL);
            return self.owned_or_error(false);
        }
        let lease = self.held.lease();
        let in_flight = ReleaseOnDrop::new(Arc::clone(&self.lock), lease.clone());
        let waiters = self.outer.as_ref().map(|outer| &outer.waiters);
        let result = end_lease(&self.lock, waiters, &lease).await;
        in_flight.disarm();
        match result {
            Ok(released) => {
                if !released {
                    self.held.labels().count(metric::RELEASE_NOT_OWNED_TOTAL);
                }
                self.owned_or_error(released)
            }
            Err(error) => {
                self.held
                    .labels()
                    .count_with(metric::BACKEND_ERRORS_TOTAL, "op", "release");
                Err(error)
            }
        }
    }

    /// `Ok(())` if the lease was ours, [`LockError::NotOwned`] otherwise.
    fn owned_or_error(&self, owned: bool) -> Result<(), LockError> {
        if owned {
            Ok(())
        } else {
            Err(LockError::NotOwned {
                name: self.name().to_owned(),
            })
        }
    }

    /// Gives up ownership without releasing: renewal stops and the lock stays held until its
    /// TTL runs out (or until the returned lease is released through
    /// [`Locker::release`](crate::Locker::release)). For handing a lease to another process or
    /// keeping a job's lock across a restart: keep `lease.to_string()` (its text form) and
    /// take it back with [`Locker::adopt`](crate::Locker::adopt). A nested guard changes
    /// nothing and returns a copy.
    pub fn leak(mut self) -> Lease {
        if !self.is_nested() {
            self.armed = false;
            self.finish();
        }
        self.held.lease()
    }

    /// Stops renewal, ends reentrancy and records the hold: called once, by the outermost
    /// guard's release, leak or drop.
    fn finish(&self) {
        self.held.end();
        if let Some(Outer {
            owner: Some((owners, task)),
            ..
        }) = &self.outer
        {
            owners.leave(*task, self.held.shared_name(), self.held.kind());
        }
        self.held
            .labels()
            .ended(self.held.held_for(), self.held.kind().permits());
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.finish();
        if self.held.is_revoked() {
            crate::runtime::revocation::honoured(self.held.labels());
        }
        let (lock, held) = (Arc::clone(&self.lock), Arc::clone(&self.held));
        let waiters = self.outer.as_ref().map(|outer| Arc::clone(&outer.waiters));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(async move {
                // After any renewal in flight, never before it.
                let _op = held.op().await;
                if held.kept_by_lock_delay() {
                    return;
                }
                let lease = held.lease();
                match end_lease(&lock, waiters.as_ref(), &lease).await {
                    Ok(released) => {
                        tracing::debug!(name = lease.name(), released, "released on drop");
                    }
                    Err(error) => tracing::warn!(
                        name = lease.name(),
                        %error,
                        "release on drop failed; the lock expires at the end of its TTL"
                    ),
                }
            })),
            Err(_) => tracing::warn!(
                name = self.held.name(),
                "guard dropped outside a tokio runtime; the lock expires at the end of its TTL"
            ),
        }
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("backend", &self.lock.backend())
            .field("lease", &self.held.lease())
            .field("renewing", &self.held.is_renewing())
            .field("nested", &self.is_nested())
            .field("lost", &self.held.is_lost())
            .finish()
    }
}

/// A cheap, cloneable view of a held lease: its name, fencing token, validity, and whether it
/// was lost. Handed to the work of [`LockRequest::run`](crate::LockRequest::run).
#[derive(Clone)]
pub struct LeaseWatch {
    held: Arc<HeldLease>,
}

impl LeaseWatch {
    /// Resolves when the holder is asked to give the lock up, or the lease is lost; see
    /// [`Guard::revoked`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn revoked(&self) -> impl Future<Output = ()> + Send + 'static {
        Arc::clone(&self.held).revoked()
    }

    /// Whether the holder was asked to give the lock up; see [`Guard::is_revoked`].
    #[must_use]
    pub fn is_revoked(&self) -> bool {
        self.held.is_revoked()
    }

    /// The lock name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.held.name()
    }

    /// What the lease holds: the mutex, a read share, the write lock, or permits.
    #[must_use]
    pub fn kind(&self) -> crate::Kind {
        self.held.kind()
    }

    /// The fencing token of this grant; pass it to every write to the protected resource.
    #[must_use]
    pub fn fencing_token(&self) -> u64 {
        self.held.fencing_token()
    }

    /// The lock name and this grant's fencing token, for the store's fence; see
    /// [`Guard::fence`].
    #[must_use]
    pub fn fence(&self) -> crate::Fence {
        crate::Fence::new(self.held.name(), self.held.fencing_token())
    }

    /// The local monotonic instant after which the lease must be assumed gone.
    #[must_use]
    pub fn valid_until(&self) -> Instant {
        self.held.valid_until()
    }

    /// Whether the lease is still ours to work under as far as this process knows; see
    /// [`Guard::is_held`].
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// When [`LeaseWatch::lost`] fires unless a renewal moves it; see [`Guard::stop_at`].
    #[must_use]
    pub fn stop_at(&self) -> Instant {
        self.held.stop_at()
    }

    /// Whether the last renewal failed and none has succeeded since; see
    /// [`Guard::is_at_risk`].
    #[must_use]
    pub fn is_at_risk(&self) -> bool {
        self.held.is_at_risk()
    }

    /// Resolves when the lease is at risk or lost; see [`Guard::at_risk`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn at_risk(&self) -> impl Future<Output = ()> + Send + 'static {
        Arc::clone(&self.held).at_risk()
    }

    /// Resolves when the lease is lost; see [`Guard::lost`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        Arc::clone(&self.held).lost()
    }
}

impl fmt::Debug for LeaseWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseWatch")
            .field("lease", &self.held.lease())
            .field("lost", &self.held.is_lost())
            .finish()
    }
}
