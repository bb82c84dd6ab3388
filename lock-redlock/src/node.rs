//! One member of a Redlock, and the bounded calls a round makes on it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{LockError, Op, TimeoutPhase};
use tokio::time::Instant;

use crate::telemetry::{self, NodeKeys, Reply};

/// One independent lock store and its label (for the `node` metric label and logs).
pub(crate) struct Node {
    pub(crate) lock: Arc<dyn Lock>,
    pub(crate) label: Arc<str>,
    /// Its answer counters' keys.
    keys: NodeKeys,
    /// Its last call in any round failed (timed out or errored): a release does not wait for
    /// it, so a hung or down node costs one release its timeout, not every release.
    lagging: AtomicBool,
}

impl Node {
    pub(crate) fn new(lock: Arc<dyn Lock>, label: Arc<str>) -> Self {
        let keys = NodeKeys::new(&label);
        Self {
            lock,
            label,
            keys,
            lagging: AtomicBool::new(false),
        }
    }

    /// Records one call's outcome in the node metrics, and whether the node now lags.
    pub(crate) fn answered(&self, op: Op, answer: Result<Reply, &LockError>) {
        telemetry::node_answer(&self.keys, op, answer);
        self.finished(answer.is_ok());
    }

    /// Records the outcome of a repair (see `crate::repair`) in the node metrics, under
    /// `op="repair"`, and whether the node now lags.
    pub(crate) fn repaired(&self, answer: Result<Reply, &LockError>) {
        self.answered_in(telemetry::REPAIR, answer);
    }

    /// Records one call's outcome in the node metrics under the `op` label of `column` (see
    /// `telemetry`), and whether the node now lags.
    pub(crate) fn answered_in(&self, column: usize, answer: Result<Reply, &LockError>) {
        telemetry::node_answer_in(&self.keys, column, answer);
        self.finished(answer.is_ok());
    }

    /// A call finished: answered (any answer, busy and not-owned included) or failed. For a
    /// call already counted (as timed out) whose late outcome still tells whether the node
    /// is back.
    pub(crate) fn finished(&self, answered: bool) {
        self.lagging.store(!answered, Ordering::Relaxed);
    }

    /// Whether the node's last call failed (see `lagging`).
    pub(crate) fn lagging(&self) -> bool {
        self.lagging.load(Ordering::Relaxed)
    }
}

/// Runs one node operation for at most `timeout`. Past it the operation is dropped (the node's
/// own cancel-safety applies: the request may still be applied) and a
/// [`TimeoutPhase::Command`] timeout is returned.
pub(crate) async fn bounded<T>(
    timeout: Duration,
    op: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    let started = Instant::now();
    match tokio::time::timeout(timeout, op).await {
        Ok(result) => result,
        Err(_) => Err(LockError::Timeout {
            phase: TimeoutPhase::Command,
            elapsed: started.elapsed(),
        }),
    }
}

/// Whether a request that failed with `error` may still have changed the node, so it must be
/// released (lock-core's rule).
pub(crate) fn may_have_applied(error: &LockError) -> bool {
    error.may_have_applied()
}
