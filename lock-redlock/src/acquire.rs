//! One acquire round: the same name and token sent to all N nodes at once, decided by the
//! quorum, and cleaned up after, in a task of its own so that neither an early answer nor a
//! cancelled caller leaves a key behind.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt as _};
use lock_core::{Attempt, Lease, LockError, Op, Token, valid_until};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::error::{QuorumNotReached, ValidityExpired};
use crate::node::{bounded, may_have_applied};
use crate::redlock::Shared;
use crate::tally::{Decision, Tally, holder_ttl, validity};
use crate::telemetry::{self, Reply};

/// The answer a round sends back to the caller of `try_acquire`.
pub(crate) type Answer = Result<Attempt, LockError>;

/// One acquire of `name` with `token` over all nodes.
pub(crate) struct AcquireRound {
    pub(crate) shared: Arc<Shared>,
    pub(crate) name: Arc<str>,
    pub(crate) token: Token,
    /// The TTL in whole milliseconds (what the nodes apply).
    pub(crate) ttl: Duration,
    pub(crate) drift: Duration,
    /// Each node's attempt is cut off after this.
    pub(crate) node_timeout: Duration,
    /// Taken before any request was sent; validity is counted from here.
    pub(crate) started: Instant,
}

/// A finished node operation.
enum Step {
    Acquire(usize, Result<Attempt, LockError>),
    Release(usize, Result<bool, LockError>),
}

/// What a node said to the acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeState {
    Pending,
    Granted,
    Busy,
    Failed {
        /// The request may still have set the key.
        applied: bool,
    },
}

impl NodeState {
    /// Whether the node may hold our token, so a failed round must release it. A busy answer
    /// is an atomic refusal: the key holds another token, and compare-and-delete with ours
    /// could never match, so it is not sent.
    fn may_hold_ours(self) -> bool {
        matches!(self, Self::Granted | Self::Failed { applied: true })
    }
}

/// What the round does with the answers.
enum Phase {
    /// A quorum is still possible.
    Deciding,
    /// The caller got a lease. Late grants are part of it: the lease's release covers them,
    /// waiting on each node for its attempt here to finish (`in_flight` says which have not).
    Holding {
        in_flight: Option<watch::Sender<Vec<bool>>>,
    },
    /// The acquire failed (or the caller is gone): every node that may hold our token is
    /// released once its attempt has finished. Entered as soon as a quorum is impossible,
    /// which may be before the answer (busy or error) is known.
    Cleaning,
}

/// What the answers so far carry beyond the counts.
#[derive(Default)]
struct Evidence {
    /// The largest fencing token among the grants.
    fence: u64,
    /// The busy nodes' remaining TTLs.
    holder_ttls: Vec<Option<Duration>>,
    /// Busy nodes whose holder never announces its release (another client's lock).
    silent_holders: usize,
    /// The first node error (the source of a quorum error).
    first_error: Option<LockError>,
    /// Nodes that refused the input itself (the same input for all).
    invalid: usize,
    first_invalid: Option<LockError>,
}

impl AcquireRound {
    /// Runs the round to the end: sends the answer through `reply` as soon as it is decided,
    /// then sees every node's attempt (each bounded by the node timeout) through, releasing
    /// whatever must be released.
    pub(crate) async fn run(self, reply: oneshot::Sender<Answer>) {
        let n = self.shared.nodes.len();
        let mut work: FuturesUnordered<BoxFuture<'static, Step>> =
            (0..n).map(|node| self.acquire_on(node)).collect();
        let mut states = vec![NodeState::Pending; n];
        let mut release_sent = vec![false; n];
        let mut tally = Tally::new(n);
        let mut evidence = Evidence::default();
        let mut reply = Some(reply);
        let mut phase = Phase::Deciding;
        while let Some(step) = work.next().await {
            let (node, result) = match step {
                Step::Acquire(node, result) => (node, result),
                Step::Release(node, result) => {
                    self.released(node, &result);
                    continue;
                }
            };
            states[node] = self.record(node, result, &mut tally, &mut evidence);

            if reply.as_ref().is_some_and(oneshot::Sender::is_closed) {
                // The caller gave up before the answer.
                reply = None;
                telemetry::quorum_outcome(Op::Acquire, "cancelled");
                phase = Phase::Cleaning;
            }
            if matches!(phase, Phase::Deciding) && tally.quorum_impossible() {
                // Failed, whatever the rest say: release what we got now, even if the answer
                // (busy or error) waits for more nodes.
                phase = Phase::Cleaning;
            }
            if let Some(decision) = reply.as_ref().and_then(|_| tally.decide()) {
                let (answer, outcome) = self.conclude(decision, &tally, &mut evidence);
                let granted = matches!(answer, Ok(Attempt::Acquired(_)));
                // Tell a release which nodes are still pending, before the caller can make one.
                let in_flight = (granted && tally.pending() > 0).then(|| {
                    let pending = states.iter().map(|s| *s == NodeState::Pending).collect();
                    self.shared.track(self.token, pending)
                });
                let delivered = reply.take().is_some_and(|r| r.send(answer).is_ok());
                telemetry::quorum_outcome(
                    Op::Acquire,
                    if delivered { outcome } else { "cancelled" },
                );
                tracing::debug!(
                    name = %self.name,
                    granted = tally.yes,
                    refused = tally.no,
                    failed = tally.failed,
                    pending = tally.pending(),
                    outcome,
                    elapsed = ?self.started.elapsed(),
                    "redlock acquire decided"
                );
                phase = if granted && delivered {
                    Phase::Holding { in_flight }
                } else {
                    if in_flight.is_some() {
                        self.shared.untrack(&self.token);
                    }
                    Phase::Cleaning
                };
            }

            match &phase {
                Phase::Deciding => {}
                Phase::Cleaning => {
                    // Every node that may hold our token, once its attempt has finished.
                    for (other, state) in states.iter().enumerate() {
                        if state.may_hold_ours() && !release_sent[other] {
                            release_sent[other] = true;
                            work.push(self.release_on(other));
                        }
                    }
                }
                Phase::Holding { in_flight } => {
                    if let Some(in_flight) = in_flight {
                        in_flight.send_modify(|pending| pending[node] = false);
                    }
                }
            }
        }
        if let Phase::Holding {
            in_flight: Some(in_flight),
        } = phase
        {
            self.shared.untrack(&self.token);
            drop(in_flight); // wakes any release still waiting
        }
    }

    /// Counts one node's answer and keeps what the decision needs.
    fn record(
        &self,
        node: usize,
        result: Result<Attempt, LockError>,
        tally: &mut Tally,
        evidence: &mut Evidence,
    ) -> NodeState {
        let label = &self.shared.nodes[node];
        match result {
            Ok(Attempt::Acquired(lease)) => {
                telemetry::node_answer(label, Op::Acquire, Ok(Reply::Yes));
                tally.yes += 1;
                evidence.fence = evidence.fence.max(lease.fencing_token());
                NodeState::Granted
            }
            Ok(Attempt::Busy {
                holder_ttl,
                announces,
            }) => {
                telemetry::node_answer(label, Op::Acquire, Ok(Reply::No));
                tally.no += 1;
                evidence.holder_ttls.push(holder_ttl);
                evidence.silent_holders += usize::from(!announces);
                NodeState::Busy
            }
            Err(error) => {
                telemetry::node_answer(label, Op::Acquire, Err(&error));
                tracing::debug!(node = %label.label, name = %self.name, %error, "redlock node acquire failed");
                tally.failed += 1;
                if !error.is_retryable() {
                    tally.fatal += 1;
                }
                let applied = may_have_applied(&error);
                if matches!(error, LockError::InvalidInput { .. }) {
                    evidence.invalid += 1;
                    evidence.first_invalid.get_or_insert(error);
                } else {
                    evidence.first_error.get_or_insert(error);
                }
                NodeState::Failed { applied }
            }
        }
    }

    /// The answer for a decided round, and its `outcome` metric label.
    fn conclude(
        &self,
        decision: Decision,
        tally: &Tally,
        evidence: &mut Evidence,
    ) -> (Answer, &'static str) {
        match decision {
            Decision::Quorum => {
                let elapsed = self.started.elapsed();
                if validity(self.ttl, self.drift, elapsed).is_some() {
                    let lease = Lease::new(
                        Arc::clone(&self.name),
                        self.token,
                        evidence.fence,
                        valid_until(self.started, self.ttl.saturating_sub(self.drift)),
                    );
                    (Ok(Attempt::Acquired(lease)), "acquired")
                } else {
                    let error = ValidityExpired {
                        op: Op::Acquire,
                        granted: tally.yes,
                        ttl: self.ttl,
                        elapsed,
                        drift: self.drift,
                    };
                    (Err(error.into_lock_error()), "validity_expired")
                }
            }
            Decision::NoQuorum if tally.refusals_block() => {
                let holder_ttl = holder_ttl(
                    std::mem::take(&mut evidence.holder_ttls),
                    tally.nodes,
                    tally.quorum,
                );
                // One silent holder is enough to poll for: its node's release is not announced.
                let announces = evidence.silent_holders == 0;
                (
                    Ok(Attempt::Busy {
                        holder_ttl,
                        announces,
                    }),
                    "busy",
                )
            }
            Decision::NoQuorum => {
                if evidence.invalid > tally.nodes - tally.quorum
                    && let Some(invalid) = evidence.first_invalid.take()
                {
                    return (Err(invalid), "invalid");
                }
                let first = evidence
                    .first_error
                    .take()
                    .or(evidence.first_invalid.take());
                let error = QuorumNotReached::new(Op::Acquire, tally, first);
                (
                    Err(error.into_lock_error(!tally.fatal_blocks())),
                    "no_quorum",
                )
            }
        }
    }

    fn acquire_on(&self, node: usize) -> BoxFuture<'static, Step> {
        let lock = Arc::clone(&self.shared.nodes[node].lock);
        let (name, token, ttl, timeout) = (
            Arc::clone(&self.name),
            self.token,
            self.ttl,
            self.node_timeout,
        );
        Box::pin(async move {
            Step::Acquire(
                node,
                bounded(timeout, lock.as_ref().try_acquire(&name, token, ttl)).await,
            )
        })
    }

    fn release_on(&self, node: usize) -> BoxFuture<'static, Step> {
        let lock = Arc::clone(&self.shared.nodes[node].lock);
        let lease = Lease::new(Arc::clone(&self.name), self.token, 0, self.started);
        let timeout = self.shared.release_timeout();
        Box::pin(async move {
            Step::Release(node, bounded(timeout, lock.as_ref().release(&lease)).await)
        })
    }

    /// Counts a cleanup release.
    fn released(&self, node: usize, result: &Result<bool, LockError>) {
        let label = &self.shared.nodes[node];
        let reply = result
            .as_ref()
            .map(|&ours| if ours { Reply::Yes } else { Reply::No });
        telemetry::node_answer(label, Op::Release, reply);
        if let Err(error) = result {
            tracing::debug!(
                node = %label.label,
                name = %self.name,
                %error,
                "redlock cleanup release failed; the key expires with its TTL"
            );
        }
    }
}
