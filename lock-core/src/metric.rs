//! The metric names the [`Locker`](crate::Locker) records through the `metrics` facade.
//!
//! Every series carries two labels: `backend` (`"redis"`, `"memory"`, ...) and `lock`, the
//! request's [label](crate::LockRequest::label) — a name *template* such as `"order:{id}"`,
//! never the rendered name, so the number of series stays bounded. Requests without a label are
//! recorded under `lock="unlabelled"`. Install any `metrics` recorder (Prometheus, StatsD, ...)
//! to collect them; without one they cost next to nothing.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use metrics::{Key, Label, Level, Metadata, SharedString};

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
    /// Both labels as a set built once, when the request has no label of its own (the usual
    /// case): keys are then made without allocating, where the macros would build a label
    /// vector on every call — 6 allocations per acquire + release cycle otherwise.
    fixed: Option<&'static Fixed>,
}

/// The keys of one backend's unlabelled series, made (and hashed) once.
#[derive(Debug)]
pub(crate) struct Fixed {
    labels: &'static [Label],
    keys: Vec<Key>,
}

impl Fixed {
    /// The series `name` with these labels.
    fn key(&self, name: &'static str) -> Key {
        self.keys
            .iter()
            .find(|k| k.name() == name)
            .cloned()
            .unwrap_or_else(|| Key::from_static_parts(name, self.labels))
    }
}

/// What the `metrics` macros would attach to our series: this module, at `INFO`.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

impl Labels {
    /// The labels of a request for `backend` with the caller's `label`, if any. `unlabelled`
    /// is [`Labels::unlabelled_set`] of the same backend.
    pub(crate) fn new(
        backend: &'static str,
        label: Option<SharedString>,
        unlabelled: &'static Fixed,
    ) -> Self {
        match label {
            Some(lock) => Self {
                backend,
                lock,
                fixed: None,
            },
            None => Self {
                backend,
                lock: SharedString::const_str(UNLABELLED),
                fixed: Some(unlabelled),
            },
        }
    }

    /// The keys of `backend`'s unlabelled series (`backend="…", lock="unlabelled"`): made once
    /// per backend name and kept for the life of the process (a few hundred bytes for each of
    /// the handful of backend names).
    pub(crate) fn unlabelled_set(backend: &'static str) -> &'static Fixed {
        static SETS: Mutex<Vec<(&'static str, &'static Fixed)>> = Mutex::new(Vec::new());
        let mut sets = SETS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, fixed)) = sets.iter().find(|(name, _)| *name == backend) {
            return fixed;
        }
        let labels: &'static [Label] = Box::leak(Box::new([
            Label::from_static_parts("backend", backend),
            Label::from_static_parts("lock", UNLABELLED),
        ]));
        let names = [
            ACQUIRE_ATTEMPTS_TOTAL,
            ACQUIRED_TOTAL,
            ACQUIRE_WAIT_SECONDS,
            HELD_SECONDS,
            HELD,
            WAITERS,
            LOST_TOTAL,
            RELEASE_NOT_OWNED_TOTAL,
        ];
        let keys = names
            .into_iter()
            .map(|name| Key::from_static_parts(name, labels))
            .collect();
        let fixed: &'static Fixed = Box::leak(Box::new(Fixed { labels, keys }));
        sets.push((backend, fixed));
        fixed
    }

    pub(crate) fn count(&self, name: &'static str) {
        let counter = match self.fixed {
            Some(fixed) => {
                metrics::with_recorder(|r| r.register_counter(&fixed.key(name), &METADATA))
            }
            None => metrics::counter!(name, "backend" => self.backend, "lock" => self.lock.clone()),
        };
        counter.increment(1);
    }

    pub(crate) fn count_with(&self, name: &'static str, key: &'static str, value: &'static str) {
        metrics::counter!(name, "backend" => self.backend, "lock" => self.lock.clone(), key => value).increment(1);
    }

    pub(crate) fn record(&self, name: &'static str, value: Duration) {
        let histogram = match self.fixed {
            Some(fixed) => {
                metrics::with_recorder(|r| r.register_histogram(&fixed.key(name), &METADATA))
            }
            None => {
                metrics::histogram!(name, "backend" => self.backend, "lock" => self.lock.clone())
            }
        };
        histogram.record(value.as_secs_f64());
    }

    pub(crate) fn gauge(&self, name: &'static str, delta: f64) {
        let gauge = match self.fixed {
            Some(fixed) => {
                metrics::with_recorder(|r| r.register_gauge(&fixed.key(name), &METADATA))
            }
            None => metrics::gauge!(name, "backend" => self.backend, "lock" => self.lock.clone()),
        };
        gauge.increment(delta);
    }
}
