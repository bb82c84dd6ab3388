//! Every series' description, told to the recorder: the `# HELP` lines of an exporter.

use metrics::{KeyName, SharedString, Unit};

use super::*;

/// Every series' name, kind, unit and description, in the order of the module's table.
const DESCRIPTIONS: &[(&str, Series, Unit, &str)] = &[
    (
        ACQUIRE_ATTEMPTS_TOTAL,
        Series::Counter,
        Unit::Count,
        "Acquire attempts sent to the backend, one per try, whatever the answer.",
    ),
    (
        ACQUIRED_TOTAL,
        Series::Counter,
        Unit::Count,
        "Guards handed out, by via: attempt (an attempt sent to the backend was granted), \
         handover (a local guard passed the lock on; no attempt), reentry (a nested guard; no new lease), adopt (a kept lease taken back).",
    ),
    (
        NOT_ACQUIRED_TOTAL,
        Series::Counter,
        Unit::Count,
        "Requests that ended without the lock, by reason: busy, timeout, quorum, error, invalid.",
    ),
    (
        ACQUIRE_WAIT_SECONDS,
        Series::Histogram,
        Unit::Seconds,
        "Seconds from the request's start to the grant (outcome=acquired), or to the end of a wait that got no lock (outcome=timeout, busy, error, quorum, cancelled).",
    ),
    (
        HELD_SECONDS,
        Series::Histogram,
        Unit::Seconds,
        "Seconds from the grant to release, loss or leak.",
    ),
    (
        HELD,
        Series::Gauge,
        Unit::Count,
        "Leases held by guards of this process now.",
    ),
    (
        OLDEST_HELD_SECONDS,
        Series::Gauge,
        Unit::Seconds,
        "Seconds the oldest hold of this process (guard not yet released, dropped or leaked) has lasted so far; 0 when none.",
    ),
    (
        WAITERS,
        Series::Gauge,
        Unit::Count,
        "Requests of this process waiting for a held lock now.",
    ),
    (
        RENEWALS_TOTAL,
        Series::Counter,
        Unit::Count,
        "Lease renewals, by outcome: ok, not_owned (the lease was gone), error.",
    ),
    (
        LOST_TOTAL,
        Series::Counter,
        Unit::Count,
        "Leases lost while their guard still lived.",
    ),
    (
        AT_RISK_TOTAL,
        Series::Counter,
        Unit::Count,
        "Leases whose renewal failed while they were still valid (once per spell of failures).",
    ),
    (
        STOP_MARGIN_REACHED_TOTAL,
        Series::Counter,
        Unit::Count,
        "Leases told to stop at valid_until minus the stop margin, without a renewal: lost while still valid.",
    ),
    (
        RELEASE_NOT_OWNED_TOTAL,
        Series::Counter,
        Unit::Count,
        "Releases that found the lease no longer ours (it had expired, maybe taken by another holder).",
    ),
    (
        REVOCATIONS_TOTAL,
        Series::Counter,
        Unit::Count,
        "Revocation requests: sent by this process, seen by a revocable lease of it, honoured (the revoked lease given up).",
    ),
    (
        PERMITS_HELD,
        Series::Gauge,
        Unit::Count,
        "Semaphore permits held by guards of this process now.",
    ),
    (
        BACKEND_ERRORS_TOTAL,
        Series::Counter,
        Unit::Count,
        "Backend failures, by op: acquire, extend, release.",
    ),
];

#[derive(Clone, Copy)]
enum Series {
    Counter,
    Gauge,
    Histogram,
}

/// Describes every series to the current recorder: its unit and a one-line meaning, which a
/// Prometheus exporter prints as the `# HELP` line. Cheap and idempotent.
///
/// [`LockerBuilder::build`](crate::LockerBuilder::build) and [`install`] call it; call it
/// yourself after installing a recorder if your lockers were built before it.
pub fn describe() {
    metrics::with_recorder(|recorder| {
        for &(name, kind, unit, help) in DESCRIPTIONS {
            let key = KeyName::from_const_str(name);
            let help = SharedString::const_str(help);
            match kind {
                Series::Counter => recorder.describe_counter(key, Some(unit), help),
                Series::Gauge => recorder.describe_gauge(key, Some(unit), help),
                Series::Histogram => recorder.describe_histogram(key, Some(unit), help),
            }
        }
    });
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing::debug!(
            metrics = METRICS_VERSION,
            "distlock records its metrics through the `metrics` crate {METRICS_VERSION}: a recorder \
             built on another major version of `metrics` sees none of them"
        );
    });
}
