//! The state of one held lease, shared by its guard, the renewer and whoever awaits its loss.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backend::{Lock, LossWatch};
use crate::metric::{self, Labels};
use crate::{Kind, Lease, Token};

/// The op lock of a lease, taken by [`HeldLease::ops_owned`]; given back when dropped.
pub(crate) struct OpPermit(Arc<HeldLease>);

impl Drop for OpPermit {
    fn drop(&mut self) {
        self.0.ops.add_permits(1);
    }
}

pub(crate) struct HeldLease {
    name: Arc<str>,
    token: Token,
    fencing_token: u64,
    kind: Kind,
    valid_until: Mutex<Instant>,
    /// Set once, when the lease ends while the guard lives (or its stop point passed).
    lost: AtomicBool,
    /// Set while the last renewal failed and none has succeeded since: the lease is still
    /// valid, but may not be for long.
    at_risk: AtomicBool,
    /// How long before `valid_until` the work is told to stop: `lost()` fires at
    /// `valid_until - stop_margin` (client-go's RenewDeadline below its LeaseDuration).
    stop_margin: Duration,
    /// Whether the renewer should keep extending it; cleared before release or leak.
    renewing: AtomicBool,
    /// Set once, when the outermost guard is released, dropped or leaked: the hold is over
    /// (what the oldest-hold gauge counts until).
    ended: AtomicBool,
    /// Wakes `lost()` waiters when `valid_until` moves or the lease is lost.
    changed: Notify,
    /// Serialises extends and the release of this lease: a release waits for a renewal in
    /// flight, so no renewal ever reaches the backend after the release (Redisson #7272).
    /// A one-permit semaphore held in place, rather than an `Arc<Mutex>`, so that a grant
    /// allocates once, not twice; the renewer's owned permit is [`OpPermit`].
    ops: tokio::sync::Semaphore,
    /// The TTL each renewal asks for (the holder's; the store is asked for `lock_delay` more).
    renew_ttl: Duration,
    /// The request's lock-delay: every TTL sent to the store is this much longer than the
    /// holder's, and every expiry the store answers is this much later than the holder's
    /// validity (`LockRequest::lock_delay`).
    lock_delay: Duration,
    /// Renewal stops extending past this instant (the cap on total hold time).
    hold_until: Option<Instant>,
    acquired_at: Instant,
    labels: Labels,
    /// The backend's watch on the lease's key (`Lock::watch_loss`), dropped when the hold
    /// ends so that the release's own deletion is not taken for a loss.
    loss_watch: Mutex<Option<LossWatch>>,
    /// Set once the backend was asked for that watch ([`HeldLease::watch_loss`]): a lease
    /// adopted by another runtime's watchdog is not watched twice.
    loss_watch_asked: AtomicBool,
    /// Whether the watchdog looks for a revocation request after each renewal
    /// (`LockRequest::revocable`).
    revocable: bool,
    /// Set while the watchdog's look for a revocation request is under way.
    looking: AtomicBool,
    /// Set once, when a revocation request for this grant was found.
    revoked: AtomicBool,
    /// Why, as the revoker said.
    revocation_note: Mutex<Option<Arc<str>>>,
}

impl HeldLease {
    /// The state of `lease`, granted at `now`.
    pub(crate) fn new(
        lease: &Lease,
        labels: Labels,
        renew_ttl: Option<Duration>,
        max_hold: Option<Duration>,
        stop_margin: Duration,
        now: Instant,
    ) -> Self {
        let acquired_at = now;
        Self {
            name: Arc::clone(lease.shared_name()),
            token: *lease.token(),
            fencing_token: lease.fencing_token(),
            kind: lease.kind(),
            valid_until: Mutex::new(lease.valid_until()),
            lost: AtomicBool::new(false),
            at_risk: AtomicBool::new(false),
            stop_margin,
            renewing: AtomicBool::new(renew_ttl.is_some()),
            ended: AtomicBool::new(false),
            changed: Notify::new(),
            ops: tokio::sync::Semaphore::new(1),
            renew_ttl: renew_ttl.unwrap_or(Duration::ZERO),
            lock_delay: Duration::ZERO,
            hold_until: max_hold.and_then(|cap| acquired_at.checked_add(cap)),
            acquired_at,
            labels,
            loss_watch: Mutex::new(None),
            loss_watch_asked: AtomicBool::new(false),
            revocable: false,
            looking: AtomicBool::new(false),
            revoked: AtomicBool::new(false),
            revocation_note: Mutex::new(None),
        }
    }

    /// The same state for a lease whose store TTL carries a lock-delay of `delay`: `lease` was
    /// granted for the holder's TTL plus `delay`, so the holder's validity is `delay` shorter
    /// than what the backend answered.
    #[must_use]
    pub(crate) fn with_lock_delay(mut self, delay: Duration) -> Self {
        if !delay.is_zero() {
            self.lock_delay = delay;
            let until = self.holder_until(self.valid_until());
            *self
                .valid_until
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner) = until;
        }
        self
    }

    /// Whether the lease's own validity has passed while a lock-delay keeps it in the store:
    /// then it is not released (nor handed over). A holder that was paused or cut off past
    /// its validity may have requests still on their way to the resource, and the delay is
    /// there to let them land before anyone else holds the lock; the store frees the name at
    /// the delay's end.
    pub(crate) fn kept_by_lock_delay(&self) -> bool {
        !self.lock_delay.is_zero() && Instant::now() >= self.valid_until()
    }

    /// The same state, looking for revocation requests after each renewal when `revocable`.
    #[must_use]
    pub(crate) fn with_revocable(mut self, revocable: bool) -> Self {
        self.revocable = revocable;
        self
    }

    /// Whether the watchdog should look for a revocation request now: revocable, not revoked
    /// yet, and no look under way (which this call starts).
    pub(crate) fn should_look_for_revocation(&self) -> bool {
        self.revocable
            && !self.revoked.load(Ordering::Acquire)
            && !self.has_ended()
            && !self.looking.swap(true, Ordering::AcqRel)
    }

    /// The look for a revocation request is over.
    pub(crate) fn looked_for_revocation(&self) {
        self.looking.store(false, Ordering::Release);
    }

    /// A revocation request for this grant was found: `true` the first time.
    pub(crate) fn mark_revoked(&self, note: Option<Arc<str>>) -> bool {
        *self
            .revocation_note
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = note;
        let first = !self.revoked.swap(true, Ordering::AcqRel);
        if first {
            self.changed.notify_waiters();
        }
        first
    }

    /// Whether it looks for revocation requests.
    pub(crate) fn is_revocable(&self) -> bool {
        self.revocable
    }

    /// Resolves when the hold is over (released, dropped, leaked), lost, or revoked.
    pub(crate) async fn over_or_revoked(self: Arc<Self>) {
        self.until(|held| held.has_ended() || held.is_revoked() || held.is_lost())
            .await;
    }

    /// Whether its holder was asked to give the lock up.
    pub(crate) fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
    }

    /// Why its holder was asked to give the lock up, if the revoker said.
    pub(crate) fn revocation_note(&self) -> Option<Arc<str>> {
        self.revocation_note
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Resolves when the holder is asked to give the lock up, or the lease is lost.
    pub(crate) async fn revoked(self: Arc<Self>) {
        self.until(|held| held.is_revoked() || held.is_lost()).await;
    }

    /// The TTL to ask the store for so that the holder keeps `ttl`: `ttl` plus the lock-delay.
    pub(crate) fn store_ttl(&self, ttl: Duration) -> Duration {
        ttl.saturating_add(self.lock_delay)
    }

    /// The holder's validity for an expiry the store answered: the lock-delay earlier.
    fn holder_until(&self, store_until: Instant) -> Instant {
        store_until
            .checked_sub(self.lock_delay)
            .unwrap_or(store_until)
    }

    /// Asks `lock` to tell this lease at once when its key is gone (`Lock::watch_loss`), and
    /// keeps the watch until the hold ends; once per lease, and not for a hold already over.
    /// The backend's callback holds the lease weakly: a watch never keeps a released lease
    /// alive.
    ///
    /// The watchdog calls it when it takes the lease in (see `runtime::renewal`), not the
    /// grant: the bulk of short holds end before that and never cost a watch.
    pub(crate) fn watch_loss(self: &Arc<Self>, lock: &dyn Lock) {
        if self.has_ended() || self.loss_watch_asked.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        let on_loss = Box::new(move || {
            if let Some(held) = weak.upgrade() {
                held.key_lost();
            }
        });
        if let Some(watch) = lock.watch_loss(&self.lease(), on_loss) {
            self.keep_loss_watch(watch);
        }
    }

    /// Keeps the backend's watch on the lease's key until the hold ends (see
    /// [`HeldLease::end`]); a watch given after that is dropped at once.
    pub(crate) fn keep_loss_watch(&self, watch: LossWatch) {
        let mut slot = self
            .loss_watch
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !self.has_ended() {
            *slot = Some(watch);
        }
    }

    /// The backend saw the lease's key deleted or holding another token: the lease is lost,
    /// unless the hold is over already (then it was our own release or hand-over).
    pub(crate) fn key_lost(&self) {
        if !self.has_ended() {
            tracing::debug!(name = %self.name, "the lease's key was deleted or overwritten");
            self.mark_lost();
        }
    }

    /// Waits for the op lock (for an extend or the release).
    pub(crate) async fn op(&self) -> tokio::sync::SemaphorePermit<'_> {
        match self.ops.acquire().await {
            Ok(permit) => permit,
            // The semaphore is never closed.
            Err(_) => unreachable!("the op lock of a lease is never closed"),
        }
    }

    /// Takes the op lock if it is free, without waiting (for the renewer), as a permit that
    /// keeps the lease alive and gives the lock back when dropped.
    pub(crate) fn ops_owned(self: Arc<Self>) -> Option<OpPermit> {
        self.ops.try_acquire().ok()?.forget();
        Some(OpPermit(self))
    }

    /// The labels of the metric series of this lease.
    pub(crate) fn labels(&self) -> &Labels {
        &self.labels
    }

    /// When the lease was granted.
    pub(crate) fn acquired_at(&self) -> Instant {
        self.acquired_at
    }

    /// How long ago the lease was granted.
    pub(crate) fn held_for(&self) -> Duration {
        self.acquired_at.elapsed()
    }

    /// How often the renewer extends the lease: every third of its renewed length.
    pub(crate) fn renew_period(&self) -> Duration {
        self.renew_ttl / 3
    }

    /// How long after a renewal answered at `now` to renew again: every third of the lease,
    /// but sooner when the store gave less than the lease asked for, so that the next renewal
    /// comes halfway to the stop point at the latest. A store may answer a shorter validity
    /// than asked: a Redlock's drift, or etcd's shared lease kept alive a moment ago, which
    /// with a long lock-delay can leave the holder less than a third of its lease.
    pub(crate) fn next_renewal_in(&self, now: Instant) -> Duration {
        let period = self.renew_period();
        let to_stop = self.stop_at().saturating_duration_since(now);
        period.min(to_stop / 2).max(period / 10)
    }

    /// The TTL a renewal at `now` asks for: the renewed length, cut short by the cap on hold
    /// time.
    pub(crate) fn renew_ttl_at(&self, now: Instant) -> Duration {
        match self.hold_until {
            Some(cap) => self.renew_ttl.min(cap.saturating_duration_since(now)),
            None => self.renew_ttl,
        }
    }

    /// The name, shared (a map key without a copy of the text).
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    pub(crate) fn valid_until(&self) -> Instant {
        *self
            .valid_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How long before `valid_until` the work is told to stop.
    pub(crate) fn stop_margin(&self) -> Duration {
        self.stop_margin
    }

    /// The instant `lost()` fires unless a renewal moves it: `valid_until - stop_margin`
    /// (`valid_until` itself if the subtraction would leave the clock's range).
    pub(crate) fn stop_at(&self) -> Instant {
        let until = self.valid_until();
        until.checked_sub(self.stop_margin).unwrap_or(until)
    }

    pub(crate) fn lease(&self) -> Lease {
        Lease::new(
            Arc::clone(&self.name),
            self.token,
            self.fencing_token,
            self.valid_until(),
        )
        .with_kind(self.kind)
    }

    /// The store extended the lease to `store_until` (what `Lock::extend` answered): the
    /// holder's validity moves to that, less the lock-delay.
    pub(crate) fn set_valid_until(&self, store_until: Instant) {
        *self
            .valid_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = self.holder_until(store_until);
        self.changed.notify_waiters();
    }

    /// A renewal succeeded (the store's expiry is now `until`): the lease is safe again.
    pub(crate) fn renewed(&self, until: Instant) {
        self.at_risk.store(false, Ordering::Release);
        self.set_valid_until(until);
    }

    /// A renewal failed while the lease is still valid: counted once per spell of failures
    /// (`distlock_at_risk_total`), and every `at_risk()` waiter is woken.
    pub(crate) fn mark_at_risk(&self) {
        if !self.at_risk.swap(true, Ordering::AcqRel) {
            self.labels.count(metric::AT_RISK_TOTAL);
            tracing::warn!(name = %self.name, backend = self.labels.backend, "lease at risk: a renewal failed");
            self.changed.notify_waiters();
        }
    }

    /// Whether the last renewal failed (and none succeeded since), the lease not yet lost.
    pub(crate) fn is_at_risk(&self) -> bool {
        self.at_risk.load(Ordering::Acquire) && !self.is_lost()
    }

    /// The stop point passed without a renewal moving it: the work is told to stop now, while
    /// the lease is still valid for `stop_margin` (counted in
    /// `distlock_stop_margin_reached_total`, and as lost).
    pub(crate) fn reach_stop_point(&self) {
        if !self.is_lost() {
            if Instant::now() < self.valid_until() {
                self.labels.count(metric::STOP_MARGIN_REACHED_TOTAL);
            }
            self.mark_lost();
        }
    }

    pub(crate) fn is_renewing(&self) -> bool {
        self.renewing.load(Ordering::Acquire)
    }

    pub(crate) fn stop_renewing(&self) {
        self.renewing.store(false, Ordering::Release);
    }

    /// The outermost guard is released, dropped or leaked: renewal stops and the hold is over.
    pub(crate) fn end(&self) {
        self.stop_renewing();
        self.ended.store(true, Ordering::Release);
        // Whoever waits for the hold's end (a revocable lease's listener) hears of it.
        self.changed.notify_waiters();
        let watch = self
            .loss_watch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(watch);
    }

    /// Whether the hold is over (see [`HeldLease::end`]); a lost lease whose guard lives is
    /// still held as far as the oldest-hold gauge goes.
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Whether the lease is still ours to work under as far as this process knows: not lost,
    /// its stop point (`valid_until - stop_margin`) not passed.
    pub(crate) fn is_held(&self) -> bool {
        !self.is_lost() && Instant::now() < self.stop_at()
    }

    /// Marks the lease lost (once), stops its renewal and wakes every `lost()` waiter.
    pub(crate) fn mark_lost(&self) {
        self.stop_renewing();
        if !self.lost.swap(true, Ordering::AcqRel) {
            self.labels.count(metric::LOST_TOTAL);
            tracing::warn!(name = %self.name, backend = self.labels.backend, "lease lost");
            self.changed.notify_waiters();
        }
    }

    /// Resolves when the lease is lost: the renewer gave up, the backend saw the key gone
    /// ([`HeldLease::key_lost`]), or the stop point
    /// (`valid_until - stop_margin`) passed without being moved.
    pub(crate) async fn lost(self: Arc<Self>) {
        self.until(Self::is_lost).await;
    }

    /// Resolves when the lease is at risk (a renewal failed, the lease still valid) or lost,
    /// whichever comes first.
    pub(crate) async fn at_risk(self: Arc<Self>) {
        self.until(|held| held.at_risk.load(Ordering::Acquire) || held.is_lost())
            .await;
    }

    /// Resolves once `done` holds, looking again whenever the lease changes; reaching the stop
    /// point without a renewal moving it loses the lease (which ends every such wait).
    async fn until(&self, done: impl Fn(&Self) -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the checks, so a change between check and wait is not missed.
            changed.as_mut().enable();
            if done(self) {
                return;
            }
            let until = self.stop_at();
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(until) => {
                    if self.stop_at() <= Instant::now() {
                        self.reach_stop_point();
                        return;
                    }
                }
            }
        }
    }
}
