//! One acquire round: the same name and token sent to all N nodes at once, driven in the
//! caller's task (one deadline for all attempts) until the quorum decides. Whatever is still
//! out then — late attempts, cleanup releases — and the whole round if the caller gives up,
//! is seen through in a task of its own, so that neither an early answer nor a cancelled
//! caller leaves a key behind; a round whose nodes all answered spawns nothing.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt as _};
use futures::stream::{FuturesUnordered, StreamExt as _};
use lock_core::backend::{Attempt, Detach, Detached};
use lock_core::{Lease, LockError, Op, TimeoutPhase, Token, valid_until};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep, sleep_until};

use crate::error::{QuorumNotReached, ValidityExpired, round_lost};
use crate::node::{bounded, may_have_applied};
use crate::releasing::{Pending, ReleaseTrack, pending_on, settled};
use crate::shared::Shared;
use crate::tally::{Decision, Tally, holder_ttl, validity};
use crate::telemetry::{self, Reply};

/// The answer of a round to the caller of `try_acquire`.
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
    /// Releases of this name still in flight when the acquire was called: on each node the
    /// attempt is sent once they have finished there (within the node timeout).
    pub(crate) releases: Vec<Pending>,
    /// Taken before any request was sent; validity is counted from here.
    pub(crate) started: Instant,
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
    /// which may be before the answer (busy or error) is known, and always before it is sent.
    /// `cleanup` registers these releases under the name until they have finished, so that
    /// the caller's next attempt at the name does not find our token on a node (`None` when
    /// every node had already answered without granting: nothing to release).
    Cleaning { cleanup: Option<ReleaseTrack> },
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
    /// Runs the round in the caller's task until the answer is decided, and returns it. The
    /// nodes still attempting then (or cleaning up) are seen through in a task of their own,
    /// each attempt bounded by the node timeout; so is the whole round if the caller gives up
    /// first.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the round goes on in the background and releases every node that
    /// may hold our token.
    pub(crate) async fn run(self) -> Answer {
        let n = self.shared.nodes.len();
        let attempts = (0..n).map(|node| self.acquire_on(node)).collect();
        let deadline = Box::pin(sleep_until(self.started + self.node_timeout));
        let mut round = Detached::new(Running {
            round: self,
            attempts,
            deadline,
            releases: None,
            states: vec![NodeState::Pending; n],
            release_sent: vec![false; n],
            tally: Tally::new(n),
            evidence: Evidence::default(),
            phase: Phase::Deciding,
            answered: false,
        });
        let running = round.work_mut();
        let answer = running.answer().await;
        // The answers already in (on healthy nodes, normally all of them): counted here, so
        // that a round with nothing left out spawns nothing.
        while let Some(event) = running.next_event().now_or_never() {
            if matches!(event, Event::Idle) {
                break;
            }
            drop(running.on(event));
        }
        answer
    }
}

/// One node's cleanup release: its index and result.
type CleanupRelease = BoxFuture<'static, (usize, Result<bool, LockError>)>;

/// A round in progress: the attempts (bounded together by `deadline`) and the cleanup
/// releases (each bounded by the release timeout; boxed, as they are the exception).
struct Running<A> {
    round: AcquireRound,
    attempts: FuturesUnordered<A>,
    deadline: Pin<Box<Sleep>>,
    /// Created with the first (most rounds release nothing).
    releases: Option<FuturesUnordered<CleanupRelease>>,
    states: Vec<NodeState>,
    release_sent: Vec<bool>,
    tally: Tally,
    evidence: Evidence,
    phase: Phase,
    /// The answer has been given (or the caller is gone).
    answered: bool,
}

/// What happened next in a round.
enum Event {
    /// A node's attempt, and whether it was sent.
    Attempt(usize, Result<Attempt, LockError>, bool),
    Released(usize, Result<bool, LockError>),
    /// The node timeout passed with attempts still out.
    Deadline,
    /// Nothing is left to run.
    Idle,
}

impl<A> Running<A>
where
    A: Future<Output = (usize, Result<Attempt, LockError>, bool)> + Send + 'static,
{
    async fn next_event(&mut self) -> Event {
        poll_fn(|cx| {
            if let Some(releases) = self.releases.as_mut()
                && let Poll::Ready(Some((node, result))) = releases.poll_next_unpin(cx)
            {
                return Poll::Ready(Event::Released(node, result));
            }
            if !self.attempts.is_empty() {
                if let Poll::Ready(Some((node, result, sent))) = self.attempts.poll_next_unpin(cx) {
                    return Poll::Ready(Event::Attempt(node, result, sent));
                }
                if self.deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::Deadline);
                }
            }
            if self.idle() {
                return Poll::Ready(Event::Idle);
            }
            Poll::Pending
        })
        .await
    }

    /// Drives the round until the answer is decided.
    async fn answer(&mut self) -> Answer {
        loop {
            let event = self.next_event().await;
            if matches!(event, Event::Idle) {
                // Every node answered, so the tally was decided: defensive only.
                return Err(round_lost(Op::Acquire));
            }
            if let Some(answer) = self.on(event) {
                return answer;
            }
        }
    }

    /// Sees the rest of the round through, after the answer (or without one: cancelled).
    async fn finish(mut self) {
        loop {
            let event = self.next_event().await;
            if matches!(event, Event::Idle) {
                break;
            }
            drop(self.on(event));
        }
        self.end();
    }

    /// Counts one event; the answer if it decides the round.
    fn on(&mut self, event: Event) -> Option<Answer> {
        match event {
            Event::Attempt(node, result, sent) => self.attempted(node, result, sent),
            Event::Released(node, result) => {
                self.released(node, &result);
                None
            }
            Event::Deadline => self.timed_out(),
            Event::Idle => None,
        }
    }

    /// Whether nothing is left to run.
    fn idle(&self) -> bool {
        self.attempts.is_empty()
            && self
                .releases
                .as_ref()
                .is_none_or(FuturesUnordered::is_empty)
    }

    /// Every attempt has finished: a release of the lease no longer waits for any.
    fn end(&mut self) {
        if let Phase::Holding { in_flight } = &mut self.phase
            && let Some(in_flight) = in_flight.take()
        {
            self.round.shared.untrack(&self.round.token);
            drop(in_flight); // wakes any release still waiting
        }
    }

    /// The attempts still out at the deadline timed out (a request may still be applied).
    fn timed_out(&mut self) -> Option<Answer> {
        self.attempts.clear();
        let elapsed = self.round.started.elapsed();
        let mut answer = None;
        for node in 0..self.states.len() {
            if self.states[node] == NodeState::Pending {
                let error = LockError::Timeout {
                    phase: TimeoutPhase::Command,
                    elapsed,
                };
                if let Some(decided) = self.attempted(node, Err(error), true) {
                    answer = Some(decided);
                }
            }
        }
        answer
    }

    /// Counts one node's attempt; the answer if it decides the round.
    fn attempted(
        &mut self,
        node: usize,
        result: Result<Attempt, LockError>,
        sent: bool,
    ) -> Option<Answer> {
        let (tally, evidence) = (&mut self.tally, &mut self.evidence);
        self.states[node] = self.round.record(node, result, sent, tally, evidence);
        if matches!(self.phase, Phase::Deciding) && self.tally.quorum_impossible() {
            // Failed, whatever the rest say: release what we got now, even if the answer
            // (busy or error) waits for more nodes.
            self.round.clean(&mut self.phase, &self.states);
        }
        let mut answer = None;
        if !self.answered
            && let Some(decision) = self.tally.decide()
        {
            let (decided, outcome) = self
                .round
                .conclude(decision, &self.tally, &mut self.evidence);
            let granted = matches!(decided, Ok(Attempt::Acquired(_)));
            if granted {
                // Tell a release which nodes are still pending, before the caller can make one.
                let in_flight = (self.tally.pending() > 0).then(|| {
                    let pending = self
                        .states
                        .iter()
                        .map(|s| *s == NodeState::Pending)
                        .collect();
                    self.round.shared.track(self.round.token, pending)
                });
                self.phase = Phase::Holding { in_flight };
            } else {
                // Before the caller can try again.
                self.round.clean(&mut self.phase, &self.states);
            }
            self.answered = true;
            telemetry::quorum_outcome(Op::Acquire, outcome);
            tracing::debug!(
                name = %self.round.name,
                granted = self.tally.yes,
                refused = self.tally.no,
                failed = self.tally.failed,
                pending = self.tally.pending(),
                outcome,
                elapsed = ?self.round.started.elapsed(),
                "redlock acquire decided"
            );
            answer = Some(decided);
        }
        self.sweep(Some(node));
        answer
    }

    /// What the phase does once `node`'s attempt (if any) has finished: in the cleaning phase,
    /// release every node that may hold our token; while holding, tell a release that waits.
    fn sweep(&mut self, node: Option<usize>) {
        match &self.phase {
            Phase::Deciding => {}
            Phase::Cleaning { cleanup } => {
                for (other, state) in self.states.iter().enumerate() {
                    if state.may_hold_ours() && !self.release_sent[other] {
                        self.release_sent[other] = true;
                        self.releases
                            .get_or_insert_with(FuturesUnordered::new)
                            .push(self.round.release_on(other));
                    }
                }
                if let (Some(cleanup), Some(node)) = (cleanup, node)
                    && !self.states[node].may_hold_ours()
                {
                    // Its attempt is over and left nothing of ours: nothing to wait for.
                    cleanup.done(node);
                }
            }
            Phase::Holding { in_flight } => {
                if let (Some(in_flight), Some(node)) = (in_flight, node) {
                    in_flight.send_modify(|pending| pending[node] = false);
                }
            }
        }
    }

    /// Counts a cleanup release.
    fn released(&self, node: usize, result: &Result<bool, LockError>) {
        if let Phase::Cleaning {
            cleanup: Some(cleanup),
        } = &self.phase
        {
            cleanup.done(node);
        }
        let label = &self.round.shared.nodes[node];
        let reply = result
            .as_ref()
            .map(|&ours| if ours { Reply::Yes } else { Reply::No });
        label.answered(Op::Release, reply);
        if let Err(error) = result {
            tracing::debug!(
                node = %label.label,
                name = %self.round.name,
                %error,
                "redlock cleanup release failed; the key expires with its TTL"
            );
        }
    }
}

/// A round dropped before its end (answered with nodes still out, or cancelled) is seen
/// through in a task of its own.
impl<A> Detach for Running<A>
where
    A: Future<Output = (usize, Result<Attempt, LockError>, bool)> + Send + 'static,
{
    fn detach(mut self) -> Option<impl Future<Output = ()> + Send + 'static> {
        if !self.answered {
            // The caller gave up before the answer: release whatever we got. Done here, in the
            // drop, so that the caller's next attempt at the name waits for these releases.
            self.answered = true;
            telemetry::quorum_outcome(Op::Acquire, "cancelled");
            self.round.clean(&mut self.phase, &self.states);
            self.sweep(None);
        }
        if self.idle() {
            self.end();
            return None;
        }
        // Without a runtime (shutting down) it is not run: the keys expire with their TTL.
        Some(self.finish())
    }
}

impl AcquireRound {
    /// Enters the cleaning phase unless already in it, registering its releases under the
    /// name: pending on every node still attempting (it may yet grant) or holding our token.
    fn clean(&self, phase: &mut Phase, states: &[NodeState]) {
        if matches!(phase, Phase::Cleaning { .. }) {
            return;
        }
        let pending: Vec<bool> = states
            .iter()
            .map(|s| *s == NodeState::Pending || s.may_hold_ours())
            .collect();
        // Every node answered and none may hold our token (all busy, say): no registration.
        let cleanup = pending
            .contains(&true)
            .then(|| self.shared.releasing.track(&self.name, pending));
        *phase = Phase::Cleaning { cleanup };
    }

    /// Counts one node's answer and keeps what the decision needs.
    fn record(
        &self,
        node: usize,
        result: Result<Attempt, LockError>,
        sent: bool,
        tally: &mut Tally,
        evidence: &mut Evidence,
    ) -> NodeState {
        let label = &self.shared.nodes[node];
        match result {
            Ok(Attempt::Acquired(lease)) => {
                label.answered(Op::Acquire, Ok(Reply::Yes));
                tally.yes += 1;
                evidence.fence = evidence.fence.max(lease.fencing_token());
                NodeState::Granted
            }
            Ok(Attempt::Busy {
                holder_ttl,
                announces,
            }) => {
                label.answered(Op::Acquire, Ok(Reply::No));
                tally.no += 1;
                evidence.holder_ttls.push(holder_ttl);
                evidence.silent_holders += usize::from(!announces);
                NodeState::Busy
            }
            Err(error) => {
                label.answered(Op::Acquire, Err(&error));
                tracing::debug!(node = %label.label, name = %self.name, %error, "redlock node acquire failed");
                tally.failed += 1;
                if !error.is_retryable() {
                    tally.fatal += 1;
                }
                let applied = sent && may_have_applied(&error);
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

    /// One node's attempt: its result, and whether it was sent. Bounded by the round's
    /// deadline, not here; a wait for our earlier release there ends at that deadline too,
    /// and an attempt that never got past it was never sent.
    fn acquire_on(
        &self,
        node: usize,
    ) -> impl Future<Output = (usize, Result<Attempt, LockError>, bool)> + Send + 'static {
        let lock = Arc::clone(&self.shared.nodes[node].lock);
        let (name, token, ttl) = (Arc::clone(&self.name), self.token, self.ttl);
        let (started, deadline) = (self.started, self.started + self.node_timeout);
        // Only the releases still in flight on this node delay it.
        let releases: Vec<Pending> = self
            .releases
            .iter()
            .filter(|release| pending_on(release, node))
            .cloned()
            .collect();
        async move {
            if !releases.is_empty()
                && tokio::time::timeout_at(deadline, settled(releases, node))
                    .await
                    .is_err()
            {
                let error = LockError::Timeout {
                    phase: TimeoutPhase::Command,
                    elapsed: started.elapsed(),
                };
                return (node, Err(error), false);
            }
            (
                node,
                lock.as_ref().try_acquire(&name, token, ttl).await,
                true,
            )
        }
    }

    /// One node's cleanup release, bounded by the release timeout.
    fn release_on(&self, node: usize) -> CleanupRelease {
        let lock = Arc::clone(&self.shared.nodes[node].lock);
        let lease = Lease::new(Arc::clone(&self.name), self.token, 0, self.started);
        let timeout = self.shared.release_timeout();
        Box::pin(async move { (node, bounded(timeout, lock.as_ref().release(&lease)).await) })
    }
}
