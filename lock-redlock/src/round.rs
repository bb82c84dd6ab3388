//! Extend, release and ping rounds: one operation sent to all N nodes at once and driven in the
//! caller's task against one deadline for the whole round (every node's call starts together,
//! so one timer bounds each of them as a timer per node would).
//!
//! Extend and ping answer at the quorum; release waits for every node that is not lagging (its
//! last call failed), or the deadline. Node calls still running when the round is dropped —
//! answered early, not waited for, or cancelled — are handed to a task of their own and seen
//! through to the same deadline, so a cancelled release still releases, and an acquire of the
//! name made after it still waits for it on each node. Every outcome, late ones too, updates
//! the node's lagging flag, so a node that answers again is waited for again.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures::FutureExt as _;
use futures::stream::{FuturesUnordered, StreamExt as _};
use lock_core::backend::{Detach, Detached};
use lock_core::{Lease, LockError, Op, TimeoutPhase};
use tokio::time::{Instant, Sleep, sleep_until};

use crate::error::QuorumNotReached;
use crate::releasing::ReleaseTrack;
use crate::shared::Shared;
use crate::tally::{Decision, Tally};
use crate::telemetry::{self, Reply};

/// What a round decided.
#[derive(Debug)]
pub(crate) struct Verdict {
    pub(crate) decision: Decision,
    pub(crate) tally: Tally,
    pub(crate) first_error: Option<LockError>,
    /// When the outcome became known (the quorum reached, or ruled out).
    pub(crate) decided_at: Instant,
    /// The nodes counted as saying no by the decision (an extend's "not ours": the repair
    /// after a quorum extend goes to these).
    pub(crate) refused: Vec<bool>,
}

impl Verdict {
    /// The error for a round that failing nodes left without a quorum (non-retryable when
    /// the nodes' non-retryable errors alone prevented it).
    pub(crate) fn no_quorum(self, op: Op) -> LockError {
        QuorumNotReached::new(op, &self.tally, self.first_error)
            .into_lock_error(!self.tally.fatal_blocks())
    }
}

/// How long [`Fanout::decide`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// Until the quorum has decided; the other nodes are seen through in the background.
    Quorum,
    /// Until the quorum has decided and every node that was not lagging when the round
    /// started has answered, or the deadline has passed (a node that has not answered by then
    /// counts as timed out). Lagging nodes are seen through in the background: one hung or
    /// down node costs one round the deadline, not every round.
    All,
}

/// One round's node calls, driven by the caller until [`decide`](Fanout::decide) answers, and
/// seen through in the background once dropped (see [`Calls::detach`](Detach::detach)).
pub(crate) struct Fanout<T, F>
where
    T: Send + 'static,
    F: Future<Output = (usize, Result<T, LockError>)> + Send + 'static,
{
    calls: Detached<Calls<T, F>>,
}

/// One round's node calls (each yields its node's index and result) and its deadline.
struct Calls<T, F> {
    counter: Counter<T>,
    work: FuturesUnordered<F>,
    deadline: Pin<Box<Sleep>>,
    /// Which nodes' calls are still in `work`.
    running: Vec<bool>,
    /// Which nodes `Until::All` waits for: those not lagging when the round started.
    waits_for: Vec<bool>,
    /// The name a release round is releasing: if it is dropped with calls left, they are
    /// registered under it until finished, so the next acquire of the name waits for them.
    releasing: Option<Arc<Lease>>,
}

impl<T, F> Fanout<T, F>
where
    T: Send + 'static,
    F: Future<Output = (usize, Result<T, LockError>)> + Send + 'static,
{
    /// Starts nothing yet: the calls run when the round is driven. `deadline` bounds the
    /// wait for every call; `is_yes` tells a yes from a no.
    pub(crate) fn new(
        shared: &Arc<Shared>,
        op: Op,
        is_yes: fn(&T) -> bool,
        calls: impl IntoIterator<Item = F>,
        deadline: Instant,
    ) -> Self {
        let n = shared.nodes.len();
        let calls = Calls {
            counter: Counter::new(shared, op, is_yes),
            work: calls.into_iter().collect(),
            deadline: Box::pin(sleep_until(deadline)),
            running: vec![true; n],
            waits_for: shared.nodes.iter().map(|node| !node.lagging()).collect(),
            releasing: None,
        };
        Self {
            calls: Detached::new(calls),
        }
    }

    /// Counts the node answers under the `op` label of `column` (see `telemetry`) instead of
    /// the round's [`Op`]'s: for the calls that have no `Op` of their own (`annotate`).
    pub(crate) fn counted_as(mut self, column: usize) -> Self {
        self.calls.work_mut().counter.column = column;
        self
    }

    /// Marks a release round of `lease` (see [`Calls`]' `releasing` field).
    pub(crate) fn releasing(mut self, lease: Arc<Lease>) -> Self {
        self.calls.work_mut().releasing = Some(lease);
        self
    }

    /// Drives the calls until `until` is met and returns the verdict. A node that has not
    /// answered by the deadline counts as timed out; its call is seen through in the
    /// background once the round is dropped (for at most one more timeout), so that a request
    /// that had to wait (a release behind its lease's acquire) is still sent.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the calls still running are seen through in the background.
    pub(crate) async fn decide(&mut self, until: Until) -> Verdict {
        self.calls.work_mut().decide(until).await
    }
}

impl<T, F> Calls<T, F>
where
    T: Send + 'static,
    F: Future<Output = (usize, Result<T, LockError>)> + Send + 'static,
{
    /// See [`Fanout::decide`].
    async fn decide(&mut self, until: Until) -> Verdict {
        // When the outcome became known: under `Until::All` the round goes on after it, but a
        // lease's validity counts from the quorum, not from the last node.
        let mut decided_at = None;
        loop {
            let decided = self.counter.tally.decide();
            if decided.is_some() {
                decided_at.get_or_insert_with(Instant::now);
            }
            if let Some(decision) = decided
                && (until == Until::Quorum || self.all_waited_for())
            {
                let verdict = Verdict {
                    decision,
                    tally: self.counter.tally,
                    first_error: self.counter.first_error.take(),
                    decided_at: decided_at.unwrap_or_else(Instant::now),
                    refused: Vec::new(),
                };
                self.count_ready();
                // With the answers counted just now: under `Until::All` every node waited for.
                return Verdict {
                    refused: self.counter.refused.clone(),
                    ..verdict
                };
            }
            let next = poll_fn(|cx| match self.work.poll_next_unpin(cx) {
                Poll::Ready(next) => Poll::Ready(next),
                Poll::Pending => self.deadline.as_mut().poll(cx).map(|()| None),
            })
            .await;
            if let Some((node, result)) = next {
                self.running[node] = false;
                self.counter.outcome(node, result);
                continue;
            }
            // The deadline (or, defensively, no call left): the rest timed out.
            self.counter.timeouts();
        }
    }

    /// Whether every node `Until::All` waits for has been counted.
    fn all_waited_for(&self) -> bool {
        self.counter
            .counted
            .iter()
            .zip(&self.waits_for)
            .all(|(&counted, &waits)| counted || !waits)
    }

    /// Counts the answers already in after the decision (on healthy nodes, normally all of
    /// them), so that a round with nothing left out spawns nothing when dropped.
    fn count_ready(&mut self) {
        while let Some(Some((node, result))) = self.work.next().now_or_never() {
            self.running[node] = false;
            self.counter.outcome(node, result);
        }
    }
}

impl<T, F> Detach for Calls<T, F>
where
    T: Send + 'static,
    F: Future<Output = (usize, Result<T, LockError>)> + Send + 'static,
{
    fn detach(self) -> Option<impl Future<Output = ()> + Send + 'static> {
        if self.work.is_empty() {
            return None;
        }
        // Registered before the drop returns, so an acquire of the name made after the drop
        // waits for the rest on each node. (Without a runtime to run the rest on, shutting
        // down, the rest is dropped unrun, which unregisters it: the keys expire with their
        // TTL.)
        let track = self.releasing.as_deref().map(|lease| {
            self.counter
                .shared
                .releasing
                .track(lease.name(), self.running.clone())
        });
        // One more timeout past the deadline: a call that waited (for its lease's acquire)
        // still gets a whole timeout of its own.
        let deadline = self.deadline.deadline();
        let rest = Rest {
            deadline: deadline + deadline.saturating_duration_since(self.counter.started),
            counter: self.counter,
            work: self.work,
            track,
        };
        Some(rest.finish())
    }
}

/// The calls of a dropped round, seen through in a task of their own.
struct Rest<T, F> {
    counter: Counter<T>,
    work: FuturesUnordered<F>,
    deadline: Instant,
    track: Option<ReleaseTrack>,
}

impl<T, F> Rest<T, F>
where
    T: Send + 'static,
    F: Future<Output = (usize, Result<T, LockError>)> + Send + 'static,
{
    async fn finish(mut self) {
        let all = async {
            while let Some((node, result)) = self.work.next().await {
                if let Some(track) = &self.track {
                    track.done(node);
                }
                self.counter.outcome(node, result);
            }
        };
        // Past the deadline the rest are abandoned (dropping the track ends the wait of any
        // acquire on them); their keys expire with their TTL. Counted as timed out (a lagging
        // node's releases, not waited for by their round, would otherwise go uncounted).
        drop(tokio::time::timeout_at(self.deadline, all).await);
        self.counter.timeouts();
    }
}

/// Counts a round's node outcomes: in its tally, the node metrics and the nodes' lagging flags.
struct Counter<T> {
    shared: Arc<Shared>,
    /// The node metrics' `op` column (see `telemetry`): the round's `Op`'s, unless
    /// [`Fanout::counted_as`] said otherwise.
    column: usize,
    /// Tells a yes from a no.
    is_yes: fn(&T) -> bool,
    /// When the round began.
    started: Instant,
    /// Which nodes' outcomes (or timeouts) have been counted.
    counted: Vec<bool>,
    /// Which nodes were counted as saying no.
    refused: Vec<bool>,
    tally: Tally,
    first_error: Option<LockError>,
}

impl<T> Counter<T> {
    fn new(shared: &Arc<Shared>, op: Op, is_yes: fn(&T) -> bool) -> Self {
        let n = shared.nodes.len();
        Self {
            shared: Arc::clone(shared),
            column: telemetry::column(op),
            is_yes,
            started: Instant::now(),
            counted: vec![false; n],
            refused: vec![false; n],
            tally: Tally::new(n),
            first_error: None,
        }
    }

    /// Counts `node`'s outcome in the tally, the node metrics and its lagging flag. One
    /// already counted (as timed out at the deadline) is not
    /// counted again, but still says whether the node lags: else a node back from a hang
    /// would stay lagging.
    fn outcome(&mut self, node: usize, result: Result<T, LockError>) {
        let label = &self.shared.nodes[node];
        if std::mem::replace(&mut self.counted[node], true) {
            label.finished(result.is_ok());
            return;
        }
        let (column, tally) = (self.column, &mut self.tally);
        match result {
            Ok(value) if (self.is_yes)(&value) => {
                label.answered_in(column, Ok(Reply::Yes));
                tally.yes += 1;
            }
            Ok(_) => {
                label.answered_in(column, Ok(Reply::No));
                tally.no += 1;
                self.refused[node] = true;
            }
            Err(error) => {
                label.answered_in(column, Err(&error));
                tracing::debug!(node = %label.label, op = telemetry::op_label_of(column), %error, "redlock node operation failed");
                tally.failed += 1;
                if !error.is_retryable() {
                    tally.fatal += 1;
                }
                self.first_error.get_or_insert(error);
            }
        }
    }

    /// Counts every node not counted yet as timed out.
    fn timeouts(&mut self) {
        for node in 0..self.counted.len() {
            if !self.counted[node] {
                let error = LockError::Timeout {
                    phase: TimeoutPhase::Command,
                    elapsed: self.started.elapsed(),
                };
                self.outcome(node, Err(error));
            }
        }
    }
}
