//! The options a request holds, the same for a single name and a multi-lock: how the lease ends,
//! how long to wait, how long to retry a failing backend, the metrics label and the cap on hold
//! time. Both request types hold one `Options` and forward their builder methods to it, so a
//! multi-lock needs no request for a name of its own to carry them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use metrics::SharedString;
use tokio::time::Instant;

use crate::backend::Lock;
use crate::{LockError, check_name, check_ttl};

/// The lease of a renewed lock (one whose request names no fixed TTL): 30 s, renewed every
/// 10 s while its guard lives.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How long [`LockRequest::acquire`](crate::LockRequest::acquire) waits for a held lock when the
/// request names no wait: 10 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// How long [`LockRequest::acquire`](crate::LockRequest::acquire) keeps retrying a backend that
/// fails (Redis down, a dropped connection) before it returns the error, when neither the locker
/// nor the request sets it: 5 s. "The lock is busy" is waited for as long as the request's wait;
/// "the store is unreachable" only this long, however long the wait.
pub const DEFAULT_RETRY_ERRORS_FOR: Duration = Duration::from_secs(5);

/// The stop margin of a lease whose request names none: a fifth of its length (the renewed
/// lease's, or the fixed TTL). With the default 30 s lease, 6 s: [`Guard::lost`](crate::Guard::lost)
/// fires 6 s before `valid_until` when renewals have failed since, so the work stops while the
/// lease is still valid. (client-go's leader election uses a 10 s RenewDeadline for a 15 s lease;
/// a fifth leaves most of the lease to renewal retries.)
#[must_use]
pub fn default_stop_margin(lease: Duration) -> Duration {
    lease / 5
}

/// The options of one request; a locker keeps the ones its requests start with.
#[derive(Clone)]
pub(super) struct Options {
    expiry: Expiry,
    /// `None`: wait without a deadline.
    wait: Option<Duration>,
    retry_errors_for: Duration,
    label: Option<SharedString>,
    max_hold: Option<Duration>,
    /// `None`: [`default_stop_margin`] of the lease.
    stop_margin: Option<Duration>,
    /// How long the store keeps the name after the holder's validity ends (Chubby's
    /// lock-delay): added to every TTL sent to the backend, never to the holder's validity.
    lock_delay: Duration,
    /// Whether a granted lease looks for revocation requests (`LockRequest::revocable`).
    revocable: bool,
}

/// How a granted lease ends.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    /// Renewed to this length every third of it while the guard lives.
    Renewed(Duration),
    /// Expires this long after the grant; never renewed.
    Fixed(Duration),
}

impl Options {
    /// A locker's defaults: [`DEFAULT_LEASE`], [`DEFAULT_WAIT`], [`DEFAULT_RETRY_ERRORS_FOR`],
    /// no label, no cap on hold time.
    pub(super) fn defaults() -> Self {
        Self {
            expiry: Expiry::Renewed(DEFAULT_LEASE),
            wait: Some(DEFAULT_WAIT),
            retry_errors_for: DEFAULT_RETRY_ERRORS_FOR,
            label: None,
            max_hold: None,
            stop_margin: None,
            lock_delay: Duration::ZERO,
            revocable: false,
        }
    }

    /// Look for revocation requests after each renewal.
    pub(super) fn set_revocable(&mut self, revocable: bool) {
        self.revocable = revocable;
    }

    /// Whether a granted lease looks for revocation requests.
    pub(super) fn revocable(&self) -> bool {
        self.revocable
    }

    /// Keep the name from any new grant for `delay` after a lease of this request ends by
    /// expiry (see [`LockRequest::lock_delay`](crate::LockRequest::lock_delay)).
    pub(super) fn set_lock_delay(&mut self, delay: Duration) {
        self.lock_delay = delay;
    }

    /// The lock-delay set, zero when none.
    pub(super) fn lock_delay(&self) -> Duration {
        self.lock_delay
    }

    /// Refuses a lock-delay on a backend whose leases may end before their TTL (a session's
    /// advisory lock ends with its connection): [`LockError::Unsupported`], before any I/O.
    pub(super) fn check_lock_delay(&self, lock: &dyn Lock) -> Result<(), LockError> {
        if self.lock_delay.is_zero() || lock.capabilities().lock_delay {
            return Ok(());
        }
        Err(LockError::Unsupported {
            backend: lock.backend(),
            kind: "lock-delayed",
        })
    }

    /// Tell the work to stop this long before `valid_until`.
    pub(super) fn set_stop_margin(&mut self, margin: Duration) {
        self.stop_margin = Some(margin);
    }

    /// The stop margin set, if any (`None`: a fifth of each lease).
    pub(super) fn stop_margin(&self) -> Option<Duration> {
        self.stop_margin
    }

    /// The stop margin of a lease of `ttl`: the one set, or [`default_stop_margin`].
    pub(super) fn stop_margin_for(&self, ttl: Duration) -> Duration {
        self.stop_margin.unwrap_or_else(|| default_stop_margin(ttl))
    }

    /// A renewed lease of this length.
    pub(super) fn set_lease(&mut self, lease: Duration) {
        self.expiry = Expiry::Renewed(lease);
    }

    /// A fixed TTL, not renewed.
    pub(super) fn set_fixed_ttl(&mut self, ttl: Duration) {
        self.expiry = Expiry::Fixed(ttl);
    }

    /// Wait at most this long; a wait the clock cannot hold is a wait without a deadline.
    pub(super) fn set_wait(&mut self, wait: Duration) {
        self.wait = Instant::now().checked_add(wait).map(|_| wait);
    }

    /// Wait without a deadline.
    pub(super) fn set_wait_forever(&mut self) {
        self.wait = None;
    }

    pub(super) fn set_retry_errors_for(&mut self, budget: Duration) {
        self.retry_errors_for = budget;
    }

    pub(super) fn set_label(&mut self, label: SharedString) {
        self.label = Some(label);
    }

    pub(super) fn set_max_hold(&mut self, max_hold: Duration) {
        self.max_hold = Some(max_hold);
    }

    /// The TTL each attempt asks for: the renewed lease's length or the fixed TTL.
    pub(super) fn ttl(&self) -> Duration {
        match self.expiry {
            Expiry::Renewed(ttl) | Expiry::Fixed(ttl) => ttl,
        }
    }

    /// The length the watchdog renews a granted lease to; `None` for a fixed TTL.
    pub(super) fn renewal(&self) -> Option<Duration> {
        match self.expiry {
            Expiry::Renewed(lease) => Some(lease),
            Expiry::Fixed(_) => None,
        }
    }

    /// How long to wait for a held lock; `None` without a deadline.
    pub(super) fn wait(&self) -> Option<Duration> {
        self.wait
    }

    /// How long a failing backend is retried while waiting.
    pub(super) fn retry_errors_for(&self) -> Duration {
        self.retry_errors_for
    }

    /// The request's own metrics label, if it set one.
    pub(super) fn label(&self) -> Option<SharedString> {
        self.label.clone()
    }

    /// Stop renewing this long after the grant; `None`: never.
    pub(super) fn max_hold(&self) -> Option<Duration> {
        self.max_hold
    }

    /// Checks `name`, the TTL and the lock-delay: the TTL each attempt at `name` asks the
    /// store for, which is the lease's TTL plus the lock-delay (the holder's validity is
    /// shortened by the delay again when the lease is granted: `HeldLease::new`).
    pub(super) fn check(&self, name: &Arc<str>) -> Result<Duration, LockError> {
        check_name(name)?;
        let ttl = self.ttl();
        check_ttl(ttl)?;
        let margin = self.stop_margin_for(ttl);
        if margin >= ttl {
            return Err(LockError::invalid(format!(
                "the stop margin ({margin:?}) must be shorter than the lease ({ttl:?})"
            )));
        }
        let stored = ttl
            .checked_add(self.lock_delay)
            .filter(|stored| check_ttl(*stored).is_ok())
            .ok_or_else(|| {
                LockError::invalid(format!(
                    "the lease ({ttl:?}) plus the lock-delay ({:?}) must be at most {:?}",
                    self.lock_delay,
                    crate::MAX_TTL
                ))
            })?;
        Ok(stored)
    }
}

impl Options {
    /// Adds the options to a request's `Debug` output, as fields of its own.
    pub(super) fn debug_fields(&self, out: &mut fmt::DebugStruct<'_, '_>) {
        out.field("expiry", &self.expiry)
            .field("wait", &self.wait)
            .field("retry_errors_for", &self.retry_errors_for)
            .field("label", &self.label)
            .field("max_hold", &self.max_hold)
            .field("stop_margin", &self.stop_margin)
            .field("lock_delay", &self.lock_delay)
            .field("revocable", &self.revocable);
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Options");
        self.debug_fields(&mut out);
        out.finish()
    }
}
