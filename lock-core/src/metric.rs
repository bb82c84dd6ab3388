//! The metric names the [`Locker`](crate::Locker) records through the `metrics` facade.
//!
//! Every series carries two labels: `backend` (`"redis"`, `"memory"`, ...) and `lock`, the
//! request's [label](crate::LockRequest::label) — a name *template* such as `"order:{id}"`,
//! never the rendered name, so the number of series stays bounded. Requests without a label are
//! recorded under `lock="unlabelled"`. Install any `metrics` recorder (Prometheus, StatsD, ...)
//! to collect them; without one they cost next to nothing.

use std::time::Duration;

use metrics::SharedString;

/// Counter: acquire attempts sent to the backend (one per try, busy or not).
pub const ACQUIRE_ATTEMPTS_TOTAL: &str = "distlock_acquire_attempts_total";
/// Counter: locks granted.
pub const ACQUIRED_TOTAL: &str = "distlock_acquired_total";
/// Counter: requests that ended without the lock, by `reason`: `busy` (a single try found it
/// held), `timeout` (the wait ran out), `quorum` (too few nodes of a multi-node backend said
/// yes), `error` (the backend failed), `invalid` (bad input).
pub const NOT_ACQUIRED_TOTAL: &str = "distlock_not_acquired_total";
/// Histogram, seconds: from the request's start to the grant.
pub const ACQUIRE_WAIT_SECONDS: &str = "distlock_acquire_wait_seconds";
/// Histogram, seconds: from the grant to release, loss or leak.
pub const HELD_SECONDS: &str = "distlock_held_seconds";
/// Gauge: leases held by guards of this process now.
pub const HELD: &str = "distlock_held";
/// Gauge: requests of this process waiting for a held lock now.
pub const WAITERS: &str = "distlock_waiters";
/// Counter: renewals, by `outcome`: `ok`, `not_owned` (the lease was gone), `error`.
pub const RENEWALS_TOTAL: &str = "distlock_renewals_total";
/// Counter: leases lost while their guard lived.
pub const LOST_TOTAL: &str = "distlock_lost_total";
/// Counter: releases that found the lease no longer ours.
pub const RELEASE_NOT_OWNED_TOTAL: &str = "distlock_release_not_owned_total";
/// Counter: backend failures, by `op`: `acquire`, `extend`, `release`.
pub const BACKEND_ERRORS_TOTAL: &str = "distlock_backend_errors_total";

/// The label of requests that set none.
pub(crate) const UNLABELLED: &str = "unlabelled";

/// The two labels every series carries.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    pub(crate) backend: &'static str,
    pub(crate) lock: SharedString,
}

impl Labels {
    pub(crate) fn count(&self, name: &'static str) {
        metrics::counter!(name, "backend" => self.backend, "lock" => self.lock.clone())
            .increment(1);
    }

    pub(crate) fn count_with(&self, name: &'static str, key: &'static str, value: &'static str) {
        metrics::counter!(name, "backend" => self.backend, "lock" => self.lock.clone(), key => value).increment(1);
    }

    pub(crate) fn record(&self, name: &'static str, value: Duration) {
        metrics::histogram!(name, "backend" => self.backend, "lock" => self.lock.clone())
            .record(value.as_secs_f64());
    }

    pub(crate) fn gauge(&self, name: &'static str, delta: f64) {
        metrics::gauge!(name, "backend" => self.backend, "lock" => self.lock.clone())
            .increment(delta);
    }
}
