//! How a waiting request paces itself, the same for one name and for a multi-lock: its deadline,
//! its budget for a failing backend (with a rate-limited warning per locker), the sleep before
//! its next attempt; and the span and outcome metrics around a whole acquire.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{Instrument, Span};

use crate::backend::ReleaseWatch;
use crate::metric::{self, Labels};
use crate::{Backoff, LockError, TimeoutPhase};

/// At most one warning a second per locker for backend failures retried while waiting.
const WARN_EVERY: Duration = Duration::from_secs(1);

/// The warning a locker logs for backend failures that waiting requests retry, at most once
/// per [`WARN_EVERY`] for the whole locker, so an outage under a thousand waiters does not
/// flood the log.
pub(super) struct RetryWarnings {
    backend: &'static str,
    /// The locker's retry budget, shown in the warning.
    budget: Duration,
    /// When a retried backend failure was last logged at `warn` (rate limit).
    warned: Mutex<Option<Instant>>,
}

impl RetryWarnings {
    pub(super) fn new(backend: &'static str, budget: Duration) -> Self {
        Self {
            backend,
            budget,
            warned: Mutex::new(None),
        }
    }

    fn warn(&self, name: &str, error: &LockError, failing_for: Duration) {
        let now = Instant::now();
        let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        if warned.is_none_or(|at| now.saturating_duration_since(at) >= WARN_EVERY) {
            *warned = Some(now);
            tracing::warn!(
                name,
                backend = self.backend,
                %error,
                ?failing_for,
                budget = ?self.budget,
                "the lock backend fails; retrying while waiting"
            );
        }
    }
}

/// The clock of one wait: when it started, its deadline, how long the backend has been failing
/// in a row, and the sleep between attempts.
pub(super) struct Pace<'a> {
    started: Instant,
    /// `None`: no deadline.
    deadline: Option<Instant>,
    /// How long a backend failing in a row is retried.
    budget: Duration,
    /// The start of the current run of backend failures.
    failing_since: Option<Instant>,
    warnings: &'a RetryWarnings,
    backoff: &'a Backoff,
}

impl<'a> Pace<'a> {
    /// Starts the clock now, for a wait of `wait` (`None`: without a deadline; a deadline the
    /// clock cannot hold is none either).
    pub(super) fn start(
        wait: Option<Duration>,
        budget: Duration,
        warnings: &'a RetryWarnings,
        backoff: &'a Backoff,
    ) -> Self {
        let started = Instant::now();
        Self {
            started,
            deadline: wait.and_then(|wait| started.checked_add(wait)),
            budget,
            failing_since: None,
            warnings,
            backoff,
        }
    }

    /// When the wait started.
    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// The error of a wait that ran out.
    pub(super) fn timed_out(&self) -> LockError {
        LockError::Timeout {
            phase: TimeoutPhase::Wait,
            elapsed: self.started.elapsed(),
        }
    }

    /// Whether the deadline has passed.
    pub(super) fn is_over(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// Resolves at the deadline; never without one.
    pub(super) async fn deadline(&self) {
        match self.deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    }

    /// `until`, or the deadline if that comes first.
    pub(super) fn capped(&self, until: Instant) -> Instant {
        self.deadline.map_or(until, |deadline| until.min(deadline))
    }

    /// The backend answered (the lock is busy): a run of failures, if any, is over.
    pub(super) fn answered(&mut self) {
        self.failing_since = None;
    }

    /// After an attempt that did not get the lock, `failure` being the retryable error it
    /// failed with, if any: `Err` to end the wait (the deadline passed: the failure or a
    /// timeout; or the backend has failed for the whole budget), else `Ok` with the failure
    /// to retry.
    pub(super) fn after_miss(
        &mut self,
        name: &str,
        failure: Option<LockError>,
    ) -> Result<Option<LockError>, LockError> {
        if self.is_over() {
            return Err(failure.unwrap_or_else(|| self.timed_out()));
        }
        failure
            .map(|error| self.retry_or_return(name, error))
            .transpose()
    }

    /// A retryable backend failure while waiting: `Ok(error)` (logged, to retry) while the
    /// backend has been failing for less than the budget in a row, `Err(error)` to return once
    /// it has failed that long. "The store is unreachable" is not "the lock is busy": it is
    /// bounded on its own, whatever the wait.
    fn retry_or_return(&mut self, name: &str, error: LockError) -> Result<LockError, LockError> {
        let now = Instant::now();
        let since = *self.failing_since.get_or_insert(now);
        let failing_for = now.saturating_duration_since(since);
        if failing_for < self.budget {
            self.warnings.warn(name, &error, failing_for);
            Ok(error)
        } else {
            Err(error)
        }
    }

    /// Sleeps before attempt `attempts + 1`, or until `woken` (a release) resolves first. A
    /// waiter `announced` to (subscribed to the releases of a holder that announces them, the
    /// backend not failing) sleeps as long as the holder's TTL, the release message waking it
    /// sooner (the TTL is the fallback if the message is lost). Every other waiter (not
    /// subscribed, a holder that never announces, a failing backend) polls with the backoff.
    /// Never past the deadline.
    pub(super) async fn before_next(
        &self,
        attempts: u32,
        holder_ttl: Option<Duration>,
        announced: bool,
        woken: impl Future<Output = ()>,
    ) {
        let left = self.deadline.map_or(Duration::MAX, |deadline| {
            deadline.saturating_duration_since(Instant::now())
        });
        let delay = match holder_ttl {
            Some(holder_ttl) if announced => holder_ttl.max(crate::MIN_TTL).min(left),
            _ => self.backoff.delay(attempts, holder_ttl, left),
        };
        tokio::select! {
            () = woken => {}
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Resolves when `watch` announces a release after generation `seen`; never without a watch.
pub(super) async fn changed(watch: Option<&ReleaseWatch>, seen: Option<u64>) {
    match (watch, seen) {
        (Some(watch), Some(seen)) => watch.signal().changed_since(seen).await,
        _ => std::future::pending().await,
    }
}

/// Runs one acquire in `span` (which has the fields `attempts` and `outcome`), then records how
/// it ended: the attempts it made, its outcome, and `distlock_not_acquired_total` with the
/// `reason` unless it got the lock. `acquire` answers with its result and its attempts.
pub(super) async fn instrumented<T>(
    span: Span,
    labels: &Labels,
    acquire: impl Future<Output = (Result<T, LockError>, u32)>,
) -> Result<T, LockError> {
    let acquire = async {
        // A wait that ends without the lock is recorded in the wait histogram under how it
        // ended; one dropped before its end (the caller gave up, a stop signal) as cancelled.
        let mut wait = WaitRecord {
            labels,
            started: Instant::now(),
            ended: false,
        };
        let (result, attempts) = acquire.await;
        wait.ended = true;
        let outcome = match &result {
            Ok(_) => "acquired",
            Err(error) => failure_reason(error),
        };
        if !matches!(outcome, "acquired" | "invalid") {
            labels.waited(outcome, wait.started.elapsed());
        }
        report(labels, outcome, Some(attempts));
        result
    };
    // As in `LockRequest::try_acquire`: a span no subscriber wants is not entered on each poll.
    if span.is_disabled() {
        acquire.await
    } else {
        acquire.instrument(span).await
    }
}

/// A wait under way: recorded as `cancelled` in the wait histogram if dropped before it ended.
struct WaitRecord<'a> {
    labels: &'a Labels,
    started: Instant,
    ended: bool,
}

impl Drop for WaitRecord<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.labels.waited("cancelled", self.started.elapsed());
        }
    }
}

/// Records an outcome in the current span (and the attempts, if given) and, unless it is
/// `"acquired"`, counts it in `distlock_not_acquired_total` as the `reason`.
pub(super) fn report(labels: &Labels, outcome: &'static str, attempts: Option<u32>) {
    if outcome != "acquired" {
        labels.count_with(metric::NOT_ACQUIRED_TOTAL, "reason", outcome);
    }
    let span = Span::current();
    if let Some(attempts) = attempts {
        span.record("attempts", attempts);
    }
    span.record("outcome", outcome);
}

/// The `reason` label of a request that ended without the lock.
pub(super) fn failure_reason(error: &LockError) -> &'static str {
    match error {
        LockError::InvalidInput { .. }
        | LockError::Unsupported { .. }
        | LockError::UpgradeRefused { .. }
        | LockError::PermitsMismatch { .. } => "invalid",
        LockError::Timeout {
            phase: TimeoutPhase::Wait,
            ..
        } => "timeout",
        LockError::Busy { .. } => "busy",
        LockError::QuorumNotReached { .. } => "quorum",
        _ => "error",
    }
}
