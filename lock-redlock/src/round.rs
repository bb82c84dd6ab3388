//! Extend and release rounds: one operation sent to all N nodes at once, decided by the quorum;
//! the nodes that answer after the decision are seen through in the background.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt as _};
use lock_core::{LockError, Op};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::error::round_lost;
use crate::redlock::Shared;
use crate::tally::{Decision, Tally};
use crate::telemetry::{self, Reply};

/// One node's bounded operation, tagged with the node's index.
pub(crate) type NodeCall<T> = BoxFuture<'static, (usize, Result<T, LockError>)>;

/// What a round decided, and when.
#[derive(Debug)]
pub(crate) struct Verdict {
    pub(crate) decision: Decision,
    pub(crate) tally: Tally,
    pub(crate) first_error: Option<LockError>,
    pub(crate) decided_at: Instant,
}

/// Runs `calls` (one per node) in a task of its own and returns the verdict as soon as the
/// quorum decides it; the task sees the remaining calls through, counting their answers.
/// `is_yes` tells a yes from a no.
///
/// # Cancel safety
/// Cancel safe: dropped, the round still runs every call to its end in the background.
pub(crate) async fn decide<T: Send + 'static>(
    shared: &Arc<Shared>,
    op: Op,
    calls: Vec<NodeCall<T>>,
    is_yes: fn(&T) -> bool,
) -> Result<Verdict, LockError> {
    let (reply, answer) = oneshot::channel();
    tokio::spawn(run(Arc::clone(shared), op, calls, is_yes, reply));
    answer.await.map_err(|_| round_lost(op))
}

async fn run<T>(
    shared: Arc<Shared>,
    op: Op,
    calls: Vec<NodeCall<T>>,
    is_yes: fn(&T) -> bool,
    reply: oneshot::Sender<Verdict>,
) {
    let mut work: FuturesUnordered<NodeCall<T>> = calls.into_iter().collect();
    let mut tally = Tally::new(shared.nodes.len());
    let mut first_error = None;
    let mut reply = Some(reply);
    while let Some((node, result)) = work.next().await {
        let label = &shared.nodes[node];
        match result {
            Ok(value) if is_yes(&value) => {
                telemetry::node_answer(label, op, Ok(Reply::Yes));
                tally.yes += 1;
            }
            Ok(_) => {
                telemetry::node_answer(label, op, Ok(Reply::No));
                tally.no += 1;
            }
            Err(error) => {
                telemetry::node_answer(label, op, Err(&error));
                tracing::debug!(node = %label.label, %op, %error, "redlock node operation failed");
                tally.failed += 1;
                if !error.is_retryable() {
                    tally.fatal += 1;
                }
                first_error.get_or_insert(error);
            }
        }
        if let Some(decision) = reply.as_ref().and_then(|_| tally.decide()) {
            let verdict = Verdict {
                decision,
                tally,
                first_error: first_error.take(),
                decided_at: Instant::now(),
            };
            // The caller may be gone (cancelled); the calls run to their end all the same.
            if let Some(reply) = reply.take() {
                drop(reply.send(verdict));
            }
        }
    }
}
