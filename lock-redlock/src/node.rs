//! One member of a Redlock, and the bounded calls a round makes on it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{Lock, LockError, TimeoutPhase};
use tokio::time::Instant;

use crate::telemetry::NodeKeys;

/// One independent lock store and its label (for the `node` metric label and logs).
pub(crate) struct Node {
    pub(crate) lock: Arc<dyn Lock>,
    pub(crate) label: Arc<str>,
    /// Its answer counters' keys.
    pub(crate) keys: NodeKeys,
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
