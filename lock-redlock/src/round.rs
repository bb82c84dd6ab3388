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
use lock_core::{Lease, LockError, Op, TimeoutPhase};
use tokio::time::{Instant, Sleep, sleep_until};

use crate::redlock::Shared;
use crate::releasing::ReleaseTrack;
use crate::tally::{Decision, Tally};
use crate::telemetry::Reply;

/// What a round decided.
#[derive(Debug)]
pub(crate) struct Verdict {
    pub(crate) decision: Decision,
    pub(crate) tally: Tally,
    pub(crate) first_error: Option<LockError>,
    pub(crate) decided_at: Instant,
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

/// One round's node calls (each yields its node's index and result) and its deadline.
pub(crate) struct Fanout<T, F>
where
    T: Send + 'static,
    F: Future<Output = (usize, Result<T, LockError>)> + Send + 'static,
{
    shared: Arc<Shared>,
    op: Op,
    is_yes: fn(&T) -> bool,
    work: FuturesUnordered<F>,
    started: Instant,
    deadline: Pin<Box<Sleep>>,
    /// Which nodes' answers (or timeouts) have been counted.
    counted: Vec<bool>,
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
        Self {
            shared: Arc::clone(shared),
            op,
            is_yes,
            work: calls.into_iter().collect(),
            started: Instant::now(),
            deadline: Box::pin(sleep_until(deadline)),
            counted: vec![false; n],
            running: vec![true; n],
            waits_for: shared.nodes.iter().map(|node| !node.lagging()).collect(),
            releasing: None,
        }
    }

    /// Marks a release round of `lease` (see the `releasing` field).
    pub(crate) fn releasing(mut self, lease: Arc<Lease>) -> Self {
        self.releasing = Some(lease);
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
        let mut tally = Tally::new(self.counted.len());
        let mut first_error = None;
        loop {
            if let Some(decision) = tally.decide()
                && (until == Until::Quorum || self.all_waited_for())
            {
                self.count_ready();
                return Verdict {
                    decision,
                    tally,
                    first_error,
                    decided_at: Instant::now(),
                };
            }
            let next = poll_fn(|cx| match self.work.poll_next_unpin(cx) {
                Poll::Ready(next) => Poll::Ready(next),
                Poll::Pending => self.deadline.as_mut().poll(cx).map(|()| None),
            })
            .await;
            if let Some((node, result)) = next {
                self.running[node] = false;
                self.counted[node] = true;
                count(
                    &self.shared,
                    self.op,
                    self.is_yes,
                    node,
                    result,
                    &mut tally,
                    &mut first_error,
                );
                continue;
            }
            // The deadline (or, defensively, no call left): the rest timed out.
            count_timeouts(
                &self.shared,
                self.op,
                self.is_yes,
                &mut self.counted,
                self.started,
                &mut tally,
                &mut first_error,
            );
        }
    }

    /// Whether every node `Until::All` waits for has been counted.
    fn all_waited_for(&self) -> bool {
        self.counted
            .iter()
            .zip(&self.waits_for)
            .all(|(&counted, &waits)| counted || !waits)
    }

    /// Counts the answers already in after the decision (on healthy nodes, normally all of
    /// them), so that a round with nothing left out spawns nothing when dropped.
    fn count_ready(&mut self) {
        let (mut tally, mut first_error) = (Tally::new(self.counted.len()), None);
        while let Some(Some((node, result))) = self.work.next().now_or_never() {
            self.running[node] = false;
            if std::mem::replace(&mut self.counted[node], true) {
                // Counted as timed out at the deadline: its outcome still says if it lags.
                self.shared.nodes[node].finished(result.is_ok());
            } else {
                count(
                    &self.shared,
                    self.op,
                    self.is_yes,
                    node,
                    result,
                    &mut tally,
                    &mut first_error,
                );
            }
        }
    }
}

impl<T, F> Drop for Fanout<T, F>
where
    T: Send + 'static,
    F: Future<Output = (usize, Result<T, LockError>)> + Send + 'static,
{
    fn drop(&mut self) {
        if self.work.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime left to run them on (shutting down): the keys expire with their TTL.
            return;
        };
        // Registered before this returns, so an acquire of the name made after the drop
        // waits for the rest on each node.
        let track = self.releasing.as_deref().map(|lease| {
            self.shared
                .releasing
                .track(lease.name(), self.running.clone())
        });
        // One more timeout past the deadline: a call that waited (for its lease's acquire)
        // still gets a whole timeout of its own.
        let deadline = self.deadline.deadline();
        let rest = Rest {
            shared: Arc::clone(&self.shared),
            op: self.op,
            is_yes: self.is_yes,
            work: std::mem::take(&mut self.work),
            counted: std::mem::take(&mut self.counted),
            started: self.started,
            deadline: deadline + deadline.saturating_duration_since(self.started),
            track,
        };
        runtime.spawn(rest.finish());
    }
}

/// The calls of a dropped round, seen through in a task of their own.
struct Rest<T, F> {
    shared: Arc<Shared>,
    op: Op,
    is_yes: fn(&T) -> bool,
    work: FuturesUnordered<F>,
    counted: Vec<bool>,
    started: Instant,
    deadline: Instant,
    track: Option<ReleaseTrack>,
}

impl<T, F> Rest<T, F>
where
    T: Send + 'static,
    F: Future<Output = (usize, Result<T, LockError>)> + Send + 'static,
{
    async fn finish(mut self) {
        // Only to call `count`: the round's verdict is given.
        let mut tally = Tally::new(self.shared.nodes.len());
        let mut first_error = None;
        let all = async {
            while let Some((node, result)) = self.work.next().await {
                if let Some(track) = &self.track {
                    track.done(node);
                }
                if std::mem::replace(&mut self.counted[node], true) {
                    // Counted as timed out at the deadline; its late outcome still says whether
                    // the node lags (else a node back from a hang would stay lagging).
                    self.shared.nodes[node].finished(result.is_ok());
                } else {
                    count(
                        &self.shared,
                        self.op,
                        self.is_yes,
                        node,
                        result,
                        &mut tally,
                        &mut first_error,
                    );
                }
            }
        };
        // Past the deadline the rest are abandoned (dropping the track ends the wait of any
        // acquire on them); their keys expire with their TTL. Counted as timed out (a lagging
        // node's releases, not waited for by their round, would otherwise go uncounted).
        drop(tokio::time::timeout_at(self.deadline, all).await);
        count_timeouts(
            &self.shared,
            self.op,
            self.is_yes,
            &mut self.counted,
            self.started,
            &mut tally,
            &mut first_error,
        );
    }
}

/// Counts every node not counted yet as timed out (`started`: when the round began).
fn count_timeouts<T>(
    shared: &Shared,
    op: Op,
    is_yes: fn(&T) -> bool,
    counted: &mut [bool],
    started: Instant,
    tally: &mut Tally,
    first_error: &mut Option<LockError>,
) {
    for (node, counted) in counted.iter_mut().enumerate() {
        if !std::mem::replace(counted, true) {
            let error = LockError::Timeout {
                phase: TimeoutPhase::Command,
                elapsed: started.elapsed(),
            };
            count(shared, op, is_yes, node, Err(error), tally, first_error);
        }
    }
}

/// Counts one node's answer in the tally, the node metrics and its lagging flag.
fn count<T>(
    shared: &Shared,
    op: Op,
    is_yes: fn(&T) -> bool,
    node: usize,
    result: Result<T, LockError>,
    tally: &mut Tally,
    first_error: &mut Option<LockError>,
) {
    let label = &shared.nodes[node];
    match result {
        Ok(value) if is_yes(&value) => {
            label.answered(op, Ok(Reply::Yes));
            tally.yes += 1;
        }
        Ok(_) => {
            label.answered(op, Ok(Reply::No));
            tally.no += 1;
        }
        Err(error) => {
            label.answered(op, Err(&error));
            tracing::debug!(node = %label.label, %op, %error, "redlock node operation failed");
            tally.failed += 1;
            if !error.is_retryable() {
                tally.fatal += 1;
            }
            first_error.get_or_insert(error);
        }
    }
}
