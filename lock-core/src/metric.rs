//! The metric series the [`Locker`](crate::Locker) records through the `metrics` facade, what
//! each one means, and what an exporter needs to show them well.
//!
//! # Which `metrics` version
//!
//! The series are recorded through the **`metrics` crate, version 0.24**
//! ([`METRICS_VERSION`]). A recorder built on another major version of `metrics` (for example
//! `metrics-exporter-prometheus` 0.15, which is built on `metrics` 0.23) compiles and installs
//! fine but sees none of them: each major version has its own global recorder. Use an exporter
//! built on `metrics` 0.24 (`metrics-exporter-prometheus` 0.16 to 0.18), and install it with
//! [`install`]: that call compiles only when the recorder implements this `metrics` version's
//! `Recorder` trait, so a mismatch is a compile error instead of an empty `/metrics`.
//!
//! # Labels
//!
//! Every series carries three labels: `backend` (`"redis"`, `"memory"`, ...), `lock`, the
//! request's [label](crate::LockRequest::label) — a name *template* such as `"order:{id}"`,
//! never the rendered name, so the number of series stays bounded — and `kind`, the lock kind
//! (`mutex`, `read`, `write`, `semaphore`; see [`Kind::label`](crate::Kind::label)). Requests
//! without a label are recorded under `lock="unlabelled"`. Without a recorder the series cost
//! next to nothing.
//!
//! # The series
//!
//! | series | type, unit | meaning |
//! |---|---|---|
//! | `distlock_acquire_attempts_total` | counter | acquire attempts sent to the backend, one per try, whatever the answer |
//! | `distlock_acquired_total{via}` | counter | guards handed out, by how: `via="attempt"` (an attempt sent to the backend was granted), `via="handover"` (a guard of this process passed its lock straight to this waiter: no attempt was sent), `via="reentry"` (a nested guard of a task that already held the name: nothing was sent, no new lease), `via="adopt"` (a kept lease taken back by `Locker::adopt`) |
//! | `distlock_not_acquired_total{reason}` | counter | requests that ended without the lock: `busy`, `timeout`, `quorum`, `error`, `invalid` |
//! | `distlock_acquire_wait_seconds{outcome}` | histogram, seconds | from a waiting request's start to its end: `outcome="acquired"` (the grant: attempt or handover; a single try's round trip too), or how a wait ended without the lock, `timeout`, `busy`, `error`, `quorum`, `cancelled` (its future dropped: the caller gave up, a stop signal) |
//! | `distlock_held_seconds` | histogram, seconds | from the grant to release, loss or leak |
//! | `distlock_held` | gauge | leases held by guards of this process now |
//! | `distlock_oldest_held_seconds` | gauge, seconds | how long the oldest hold counted in `distlock_held` has lasted so far: a stuck holder shows here before it releases (see "The oldest hold" below) |
//! | `distlock_waiters` | gauge | requests of this process waiting for a held lock now |
//! | `distlock_permits_held` | gauge | semaphore permits held by guards of this process now (a guard of `k` permits counts `k`) |
//! | `distlock_renewals_total{outcome}` | counter | renewals: `ok`, `not_owned`, `error` |
//! | `distlock_lost_total` | counter | leases lost while their guard lived (also when the stop margin was reached) |
//! | `distlock_at_risk_total` | counter | leases whose renewal failed while they were still valid, once per spell of failures |
//! | `distlock_stop_margin_reached_total` | counter | leases whose stop point (`valid_until` − stop margin) passed without a renewal: `lost()` fired while still valid |
//! | `distlock_release_not_owned_total` | counter | releases that found the lease no longer ours |
//! | `distlock_revocations_total{event}` | counter | revocation requests: `sent` (`Locker::revoke`), `seen` (a revocable lease found it was asked to give its lock up), `honoured` (a revoked lease released or dropped) |
//! | `distlock_backend_errors_total{op}` | counter | backend failures: `acquire`, `extend`, `release` |
//!
//! The counters add up as follows, for one `backend`, `lock` and `kind`:
//!
//! - *leases granted* = `acquired_total{via="attempt"}` + `acquired_total{via="handover"}`;
//! - *attempts that did not grant* (found the lock busy, or failed) =
//!   `acquire_attempts_total` − `acquired_total{via="attempt"}`;
//! - *attempts per acquisition* = `acquire_attempts_total` / leases granted: below 1 when most
//!   grants are local handovers (waiters of one process behind one name), which cost no attempt;
//! - *share handed over* = `acquired_total{via="handover"}` / leases granted.
//!
//! # The oldest hold
//!
//! [`HELD_SECONDS`] is observed when a hold *ends*, so a holder that never ends — stuck on a
//! deadlock, a hung call, an endless loop — records nothing there. [`OLDEST_HELD_SECONDS`]
//! shows it while it lasts: for each series (`backend`, `lock`, `kind`), the age of the oldest
//! hold of this process whose guard has not ended yet (not released, dropped or leaked),
//! whether its lease is renewed or has a fixed TTL, and also once its lease was lost or ran out
//! (the guard's work still runs: that is what a stuck holder looks like). It is what
//! [`HELD_SECONDS`] will record when that hold ends.
//!
//! The renewal task the `Locker` already runs on each tokio runtime keeps it, once a second
//! while that runtime's guards hold anything: a lease with a fixed TTL is handed to that task
//! too (at its grant, under the lock a renewed lease's grant takes already; a fixed-TTL grant
//! outside a tokio runtime is not seen). The value is the largest over every runtime and
//! every `Locker` of the process, and goes back to 0 within a second of the series' last hold
//! ending. Leaders hold their lease for their whole term by design: an election's series
//! (`lock="election"` unless [`Election::label`](crate::Election::label) says otherwise) grows
//! with the term; leave it out of stuck-holder alerts.
//!
//! # Descriptions and histogram buckets
//!
//! [`describe`] gives every series its unit and a one-line description (Prometheus' `# HELP`
//! lines). [`LockerBuilder::build`](crate::LockerBuilder::build) calls it, and so does
//! [`install`]; call it yourself if you install a recorder after building your lockers (it is
//! cheap and idempotent).
//!
//! Prometheus exporters render a histogram as a *summary* (quantiles computed in the process)
//! unless told its buckets; dashboards that use `histogram_quantile(…_bucket)`, such as the one
//! shipped with the examples, then stay empty. Give the `distlock_` series [`BUCKETS`]:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use lock_core::{Locker, MemoryLock, metric};
//! use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
//!
//! let recorder = PrometheusBuilder::new()
//!     .set_buckets_for_metric(Matcher::Prefix(metric::PREFIX.into()), metric::BUCKETS)?
//!     .build_recorder();
//! let handle = recorder.handle(); // serve handle.render() on GET /metrics
//! metric::install(recorder).map_err(|_| "a recorder was installed already")?;
//!
//! let locker = Locker::new(MemoryLock::new());
//! locker.lock("order:42").label("order:{id}").await?.release().await?;
//!
//! let text = handle.render();
//! assert!(text.contains("# HELP distlock_acquired_total"));
//! assert!(text.contains(r#"distlock_acquired_total{backend="memory",lock="order:{id}",kind="mutex",via="attempt"} 1"#));
//! assert!(text.contains("distlock_acquire_wait_seconds_bucket"), "a histogram, not a summary");
//! # Ok(()) }
//! ```

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

mod describe;

pub use describe::describe;

use metrics::{Key, Label, Level, Metadata, SharedString};

/// Counter: acquire attempts sent to the backend (one per try, busy or not).
pub const ACQUIRE_ATTEMPTS_TOTAL: &str = "distlock_acquire_attempts_total";
/// Counter: guards handed out, by `via`: `attempt` (an attempt sent to the backend was granted),
/// `handover` (a guard of this process handed its lock straight to this waiter; no attempt was
/// sent), `reentry` (a nested guard for a task that already held the name; no new lease),
/// `adopt` (a kept lease taken back by `Locker::adopt`).
pub const ACQUIRED_TOTAL: &str = "distlock_acquired_total";
/// Counter: requests that ended without the lock, by `reason`: `busy` (a single try found it
/// held), `timeout` (the wait ran out), `quorum` (too few nodes of a multi-node backend said
/// yes), `error` (the backend failed), `invalid` (bad input).
pub const NOT_ACQUIRED_TOTAL: &str = "distlock_not_acquired_total";
/// Histogram, seconds: from the request's start to the grant (`outcome="acquired"`), or to
/// the end of a wait that got no lock (`outcome` = `timeout`, `busy`, `error`, `quorum`,
/// `cancelled`).
pub const ACQUIRE_WAIT_SECONDS: &str = "distlock_acquire_wait_seconds";
/// Histogram, seconds: from the grant to release, loss or leak.
pub const HELD_SECONDS: &str = "distlock_held_seconds";
/// Gauge: leases held by guards of this process now.
pub const HELD: &str = "distlock_held";
/// Gauge, seconds: how long the oldest hold of this process counted in [`HELD`] (its guard
/// not yet released, dropped or leaked; renewed or fixed-TTL, lost or not) has lasted so far;
/// 0 when none. Updated about once a second by the `Locker`'s renewal task; see "The oldest
/// hold" in the module docs.
pub const OLDEST_HELD_SECONDS: &str = "distlock_oldest_held_seconds";
/// Gauge: requests of this process waiting for a held lock now.
pub const WAITERS: &str = "distlock_waiters";
/// Counter: renewals, by `outcome`: `ok`, `not_owned` (the lease was gone), `error`.
pub const RENEWALS_TOTAL: &str = "distlock_renewals_total";
/// Counter: leases lost while their guard lived.
pub const LOST_TOTAL: &str = "distlock_lost_total";
/// Counter: leases that became *at risk*: a renewal failed while the lease was still valid
/// (counted once per spell of failed renewals; a successful renewal ends the spell).
pub const AT_RISK_TOTAL: &str = "distlock_at_risk_total";
/// Counter: leases whose stop point (`valid_until` − the stop margin) passed without a
/// renewal moving it, so [`Guard::lost`](crate::Guard::lost) fired while the lease was still
/// valid. Each is also counted in [`LOST_TOTAL`].
pub const STOP_MARGIN_REACHED_TOTAL: &str = "distlock_stop_margin_reached_total";
/// Counter: releases that found the lease no longer ours.
pub const RELEASE_NOT_OWNED_TOTAL: &str = "distlock_release_not_owned_total";
/// Counter: revocation requests (`Locker::revoke`), by `event`: `sent` (by this process),
/// `seen` (a revocable lease of this process found it asked to give its lock up), `honoured`
/// (a revoked lease of this process was released or dropped).
pub const REVOCATIONS_TOTAL: &str = "distlock_revocations_total";
/// Gauge: semaphore permits held by guards of this process now (a guard of `k` permits
/// counts `k`; [`HELD`] counts it once).
pub const PERMITS_HELD: &str = "distlock_permits_held";
/// Counter: backend failures, by `op`: `acquire`, `extend`, `release`.
pub const BACKEND_ERRORS_TOTAL: &str = "distlock_backend_errors_total";

/// The version of the `metrics` crate the series are recorded through: a recorder built on
/// another major version sees none of them (see "Which `metrics` version" in the module docs).
pub const METRICS_VERSION: &str = "0.24";

/// The prefix of every series name, for an exporter's per-metric settings
/// (`Matcher::Prefix(PREFIX.into())` in `metrics-exporter-prometheus`).
pub const PREFIX: &str = "distlock_";

/// Histogram buckets for the `_seconds` series, in seconds: 0.5 ms to 5 min, about three per
/// decade. They cover a handover (tens of microseconds to a millisecond), a wait behind a
/// holder (milliseconds to the default 10 s wait) and a renewed hold (seconds to minutes).
pub const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];

/// Installs `recorder` as the process's global `metrics` recorder, then [describes](describe)
/// the series to it.
///
/// The same as `metrics::set_global_recorder` followed by [`describe`], with one benefit: it
/// compiles only for a recorder built on the `metrics` version distlock records through
/// ([`METRICS_VERSION`]). A recorder of another major version would otherwise install without
/// complaint and receive nothing.
///
/// # Errors
/// The recorder back, when a global recorder was installed already.
pub fn install<R>(recorder: R) -> Result<(), metrics::SetRecorderError<R>>
where
    R: metrics::Recorder + Sync + 'static,
{
    metrics::set_global_recorder(recorder)?;
    describe();
    Ok(())
}

/// How a guard was handed out: the `via` label of [`ACQUIRED_TOTAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// An attempt sent to the backend was granted.
    Attempt,
    /// A guard of this process handed its lock over.
    Handover,
    /// A nested guard of a task that held the name already.
    Reentry,
    /// A kept lease taken back by `Locker::adopt`.
    Adopt,
}

impl Via {
    const ALL: [Via; 4] = [Via::Attempt, Via::Handover, Via::Reentry, Via::Adopt];

    fn label(self) -> &'static str {
        match self {
            Via::Attempt => "attempt",
            Via::Handover => "handover",
            Via::Reentry => "reentry",
            Via::Adopt => "adopt",
        }
    }
}

/// The label of requests that set none.
pub(crate) const UNLABELLED: &str = "unlabelled";

/// The three labels every series carries.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    pub(crate) backend: &'static str,
    pub(crate) lock: SharedString,
    pub(crate) kind: &'static str,
    /// Both labels as a set built once, when the request has no label of its own (the usual
    /// case): keys are then made without allocating, where the macros would build a label
    /// vector on every call — 6 allocations per acquire + release cycle otherwise.
    fixed: Option<&'static Fixed>,
}

/// The keys of one backend's and kind's unlabelled series, made (and hashed) once.
#[derive(Debug)]
pub(crate) struct Fixed {
    labels: &'static [Label],
    keys: Vec<Key>,
    /// [`ACQUIRED_TOTAL`] with each `via`, in the order of [`Via::ALL`].
    acquired: [Key; 4],
    /// The series every acquire and release records, at hand without a search by name.
    attempts: Key,
    wait: Key,
    held: Key,
    held_seconds: Key,
    permits_held: Key,
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
    /// The labels of a request of `kind` for `backend` with the caller's `label`, if any.
    /// `unlabelled` is [`Labels::unlabelled_set`] of the same backend and kind.
    pub(crate) fn new(
        backend: &'static str,
        kind: &'static str,
        label: Option<SharedString>,
        unlabelled: &'static Fixed,
    ) -> Self {
        match label {
            Some(lock) => Self {
                backend,
                lock,
                kind,
                fixed: None,
            },
            None => Self {
                backend,
                lock: SharedString::const_str(UNLABELLED),
                kind,
                fixed: Some(unlabelled),
            },
        }
    }

    /// The keys of `backend`'s unlabelled series of `kind` (`backend="…", lock="unlabelled",
    /// kind="…"`): made once per backend name and kind and kept for the life of the process (a
    /// few hundred bytes for each of the handful of backend names and kinds).
    pub(crate) fn unlabelled_set(backend: &'static str, kind: &'static str) -> &'static Fixed {
        type Sets = Vec<((&'static str, &'static str), &'static Fixed)>;
        static SETS: Mutex<Sets> = Mutex::new(Vec::new());
        let mut sets = SETS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, fixed)) = sets.iter().find(|(key, _)| *key == (backend, kind)) {
            return fixed;
        }
        let labels: &'static [Label] = Box::leak(Box::new([
            Label::from_static_parts("backend", backend),
            Label::from_static_parts("lock", UNLABELLED),
            Label::from_static_parts("kind", kind),
        ]));
        let names = [
            ACQUIRE_ATTEMPTS_TOTAL,
            HELD_SECONDS,
            HELD,
            WAITERS,
            PERMITS_HELD,
            LOST_TOTAL,
            AT_RISK_TOTAL,
            STOP_MARGIN_REACHED_TOTAL,
            RELEASE_NOT_OWNED_TOTAL,
        ];
        let keys = names
            .into_iter()
            .map(|name| Key::from_static_parts(name, labels))
            .collect();
        let acquired = Via::ALL.map(|via| {
            let labels: &'static [Label] = Box::leak(Box::new([
                Label::from_static_parts("backend", backend),
                Label::from_static_parts("lock", UNLABELLED),
                Label::from_static_parts("kind", kind),
                Label::from_static_parts("via", via.label()),
            ]));
            Key::from_static_parts(ACQUIRED_TOTAL, labels)
        });
        let key = |name| Key::from_static_parts(name, labels);
        let fixed: &'static Fixed = Box::leak(Box::new(Fixed {
            labels,
            keys,
            acquired,
            attempts: key(ACQUIRE_ATTEMPTS_TOTAL),
            wait: Key::from_static_parts(
                ACQUIRE_WAIT_SECONDS,
                Box::leak(Box::new([
                    Label::from_static_parts("backend", backend),
                    Label::from_static_parts("lock", UNLABELLED),
                    Label::from_static_parts("kind", kind),
                    Label::from_static_parts("outcome", "acquired"),
                ])),
            ),
            held: key(HELD),
            held_seconds: key(HELD_SECONDS),
            permits_held: key(PERMITS_HELD),
        }));
        sets.push(((backend, kind), fixed));
        fixed
    }

    pub(crate) fn count(&self, name: &'static str) {
        let counter = match self.fixed {
            Some(fixed) => {
                metrics::with_recorder(|r| r.register_counter(&fixed.key(name), &METADATA))
            }
            None => {
                metrics::counter!(name, "backend" => self.backend, "lock" => self.lock.clone(), "kind" => self.kind)
            }
        };
        counter.increment(1);
    }

    /// Counts a guard handed out in [`ACQUIRED_TOTAL`], labelled with how it came.
    pub(crate) fn acquired(&self, via: Via) {
        let counter = match self.fixed {
            Some(fixed) => {
                let key = &fixed.acquired[via as usize];
                metrics::with_recorder(|r| r.register_counter(key, &METADATA))
            }
            None => metrics::counter!(
                ACQUIRED_TOTAL,
                "backend" => self.backend,
                "lock" => self.lock.clone(),
                "kind" => self.kind,
                "via" => via.label()
            ),
        };
        counter.increment(1);
    }

    /// Counts an attempt sent to the backend in [`ACQUIRE_ATTEMPTS_TOTAL`].
    pub(crate) fn attempted(&self) {
        match self.fixed {
            Some(fixed) => metrics::with_recorder(|r| {
                r.register_counter(&fixed.attempts, &METADATA).increment(1);
            }),
            None => self.count(ACQUIRE_ATTEMPTS_TOTAL),
        }
    }

    /// A guard handed out: counted in [`ACQUIRED_TOTAL`] by `via`, its wait recorded in
    /// [`ACQUIRE_WAIT_SECONDS`], and counted in [`HELD`] (and its `permits`, if any, in
    /// [`PERMITS_HELD`]). The recorder is looked up once for all of them: each look-up is a
    /// thread-local access, and these run on every grant.
    pub(crate) fn granted(&self, via: Via, waited: Duration, permits: u32) {
        let Some(fixed) = self.fixed else {
            self.acquired(via);
            self.waited("acquired", waited);
            self.gauge(HELD, 1.0);
            if permits > 0 {
                self.gauge(PERMITS_HELD, f64::from(permits));
            }
            return;
        };
        metrics::with_recorder(|r| {
            r.register_counter(&fixed.acquired[via as usize], &METADATA)
                .increment(1);
            r.register_histogram(&fixed.wait, &METADATA)
                .record(waited.as_secs_f64());
            r.register_gauge(&fixed.held, &METADATA).increment(1.0);
            if permits > 0 {
                r.register_gauge(&fixed.permits_held, &METADATA)
                    .increment(f64::from(permits));
            }
        });
    }

    /// A guard's hold ended (release, loss of its guard, leak): [`HELD`] (and [`PERMITS_HELD`]
    /// by its `permits`) goes down, and the hold is recorded in [`HELD_SECONDS`]; one look-up
    /// of the recorder, as [`Labels::granted`].
    pub(crate) fn ended(&self, held_for: Duration, permits: u32) {
        let Some(fixed) = self.fixed else {
            self.gauge(HELD, -1.0);
            if permits > 0 {
                self.gauge(PERMITS_HELD, -f64::from(permits));
            }
            self.record(HELD_SECONDS, held_for);
            return;
        };
        metrics::with_recorder(|r| {
            r.register_gauge(&fixed.held, &METADATA).decrement(1.0);
            if permits > 0 {
                r.register_gauge(&fixed.permits_held, &METADATA)
                    .decrement(f64::from(permits));
            }
            r.register_histogram(&fixed.held_seconds, &METADATA)
                .record(held_for.as_secs_f64());
        });
    }

    /// Records how long a request waited in [`ACQUIRE_WAIT_SECONDS`] under `outcome`: the
    /// grant (`acquired`), or how a wait ended without the lock.
    pub(crate) fn waited(&self, outcome: &'static str, waited: Duration) {
        metrics::histogram!(
            ACQUIRE_WAIT_SECONDS,
            "backend" => self.backend,
            "lock" => self.lock.clone(),
            "kind" => self.kind,
            "outcome" => outcome
        )
        .record(waited.as_secs_f64());
    }

    pub(crate) fn count_with(&self, name: &'static str, key: &'static str, value: &'static str) {
        metrics::counter!(name, "backend" => self.backend, "lock" => self.lock.clone(), "kind" => self.kind, key => value).increment(1);
    }

    pub(crate) fn record(&self, name: &'static str, value: Duration) {
        let histogram = match self.fixed {
            Some(fixed) => {
                metrics::with_recorder(|r| r.register_histogram(&fixed.key(name), &METADATA))
            }
            None => {
                metrics::histogram!(name, "backend" => self.backend, "lock" => self.lock.clone(), "kind" => self.kind)
            }
        };
        histogram.record(value.as_secs_f64());
    }

    pub(crate) fn gauge(&self, name: &'static str, delta: f64) {
        let gauge = match self.fixed {
            Some(fixed) => {
                metrics::with_recorder(|r| r.register_gauge(&fixed.key(name), &METADATA))
            }
            None => {
                metrics::gauge!(name, "backend" => self.backend, "lock" => self.lock.clone(), "kind" => self.kind)
            }
        };
        gauge.increment(delta);
    }
}
