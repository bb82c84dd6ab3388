//! The configuration of a `Locker`: the options its requests start with and its backoff.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::handle::Locker;
use super::options::Options;
use crate::backend::Lock;
use crate::{Backoff, metric};

/// Configures a [`Locker`]: the lease of renewed locks, the default wait, the waiting backoff
/// and the cap on hold time.
#[derive(Clone)]
#[must_use]
pub struct LockerBuilder {
    lock: Arc<dyn Lock>,
    /// The options every request starts with (a renewed lease, the wait, the retry budget,
    /// the cap on hold time; never a label).
    defaults: Options,
    backoff: Backoff,
}

impl LockerBuilder {
    /// Starts configuring a locker over a shared backend.
    pub fn from_arc(lock: Arc<dyn Lock>) -> Self {
        Self {
            lock,
            defaults: Options::defaults(),
            backoff: Backoff::default(),
        }
    }

    /// The lease of renewed locks (default [`DEFAULT_LEASE`](crate::DEFAULT_LEASE)): each
    /// renewal extends it to this much from now, every third of it. A crashed holder's lock is
    /// free at most this long after the crash. Checked when a request is made, like a
    /// per-request TTL. A request can take another length with
    /// [`LockRequest::lease`](crate::LockRequest::lease), or a fixed, unrenewed TTL with
    /// [`LockRequest::fixed_ttl`](crate::LockRequest::fixed_ttl).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.defaults.set_lease(lease);
        self
    }

    /// Stop renewing a lease this long after it was granted (default: never), for users who
    /// prefer liveness over endless renewal: past it the lease runs out and
    /// [`Guard::lost`](crate::Guard::lost) fires. Requests can override it.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.defaults.set_max_hold(max_hold);
        self
    }

    /// How long before a lease's `valid_until` its work is told to stop (default
    /// [`default_stop_margin`](crate::default_stop_margin): a fifth of the lease):
    /// [`Guard::lost`](crate::Guard::lost), and the cancellation of
    /// [`LockRequest::run`](crate::LockRequest::run), fire at `valid_until - margin` when no
    /// renewal moved it, so the work stops while the lease is still valid. Renewal retries a
    /// failing backend until then. `Duration::ZERO` gives the margin up (`lost()` at
    /// `valid_until`). A request whose lease is not longer than the margin fails with
    /// [`LockError::InvalidInput`](crate::LockError::InvalidInput); requests can override it.
    pub fn stop_margin(mut self, margin: Duration) -> Self {
        self.defaults.set_stop_margin(margin);
        self
    }

    /// How long requests that name no wait wait for a held lock (default
    /// [`DEFAULT_WAIT`](crate::DEFAULT_WAIT)); see [`LockRequest::wait`](crate::LockRequest::wait).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.defaults.set_wait(wait);
        self
    }

    /// How long a waiting request retries a failing backend before returning its error
    /// (default [`DEFAULT_RETRY_ERRORS_FOR`](crate::DEFAULT_RETRY_ERRORS_FOR)); see
    /// [`LockRequest::retry_errors_for`](crate::LockRequest::retry_errors_for).
    pub fn retry_errors_for(mut self, budget: Duration) -> Self {
        self.defaults.set_retry_errors_for(budget);
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
        Locker::with(self.lock, self.defaults, self.backoff)
    }
}

impl fmt::Debug for LockerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockerBuilder")
            .field("backend", &self.lock.backend())
            .field("lease", &self.defaults.ttl())
            .field("wait", &self.defaults.wait())
            .field("retry_errors_for", &self.defaults.retry_errors_for())
            .field("backoff", &self.backoff)
            .field("max_hold", &self.defaults.max_hold())
            .field("stop_margin", &self.defaults.stop_margin())
            .finish()
    }
}
