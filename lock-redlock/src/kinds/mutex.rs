//! The mutex over N nodes: an acquire round ([`AcquireRound`]), an extend that a quorum must
//! grant within the new validity and that then repairs the nodes that lost the key
//! (`crate::repair`), and a release sent to every node after its acquire and its repairs.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::Attempt;
use lock_core::{Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use crate::acquire::AcquireRound;
use crate::error::ValidityExpired;
use crate::releasing::{Pending, pending_on, settled};
use crate::round::{Fanout, Until, Verdict};
use crate::shared::Shared;
use crate::tally::{Decision, validity};
use crate::telemetry;

/// What a round with one TTL works within: the TTL in whole milliseconds (what the nodes
/// apply), its clock-drift allowance, and the bound of each node's call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) ttl: Duration,
    pub(crate) drift: Duration,
    pub(crate) node_timeout: Duration,
}

/// One acquire of `name` with `token` on all nodes at once: granted iff a quorum granted
/// within the validity `ttl − elapsed − drift`.
pub(crate) async fn try_acquire(
    shared: &Arc<Shared>,
    name: &str,
    token: Token,
    plan: Plan,
) -> Result<Attempt, LockError> {
    let round = AcquireRound {
        shared: Arc::clone(shared),
        name: Arc::from(name),
        token,
        ttl: plan.ttl,
        drift: plan.drift,
        node_timeout: plan.node_timeout,
        // Before the round starts, so every release answered before this call is seen.
        releases: shared.releasing.in_flight(name),
        started: Instant::now(),
    };
    round.run().await
}

/// Extends `lease` on all nodes to `plan.ttl` from now; `Some(start + ttl − drift)` iff a
/// quorum extended it within that validity, after the nodes that answered "not ours" were
/// repaired.
pub(crate) async fn extend(
    shared: &Arc<Shared>,
    lease: &Lease,
    plan: Plan,
) -> Result<Option<Instant>, LockError> {
    let Plan { ttl, drift, .. } = plan;
    let started = Instant::now();
    let shared_lease = Arc::new(lease.clone());
    let calls = shared.nodes.iter().enumerate().map(|(i, node)| {
        let (lock, lease) = (Arc::clone(&node.lock), Arc::clone(&shared_lease));
        async move { (i, lock.as_ref().extend(&lease, ttl).await) }
    });
    let deadline = started + plan.node_timeout;
    // Every node that is not lagging, not just the quorum: the answers of all of them tell
    // which nodes lost the key and need a repair.
    let verdict = Fanout::new(shared, Op::Extend, Option::is_some, calls, deadline)
        .decide(Until::All)
        .await;
    let (outcome, result) = match verdict.decision {
        Decision::Quorum => {
            let elapsed = verdict.decided_at.saturating_duration_since(started);
            if validity(ttl, drift, elapsed).is_some() {
                repair(shared, lease, &verdict, started, plan).await;
                ("extended", Ok(Some(valid_until(started, ttl - drift))))
            } else {
                let error = ValidityExpired {
                    op: Op::Extend,
                    granted: verdict.tally.yes,
                    ttl,
                    elapsed,
                    drift,
                };
                ("validity_expired", Err(error.into_lock_error()))
            }
        }
        Decision::NoQuorum if verdict.tally.refusals_block() => ("not_owned", Ok(None)),
        Decision::NoQuorum => ("no_quorum", Err(verdict.no_quorum(Op::Extend))),
    };
    telemetry::quorum_outcome(Op::Extend, outcome);
    result
}

/// After a quorum extend begun at `started`, repairs the nodes that answered "not ours", if
/// any, for what is left of the TTL.
async fn repair(
    shared: &Arc<Shared>,
    lease: &Lease,
    verdict: &Verdict,
    started: Instant,
    plan: Plan,
) {
    if !verdict.refused.contains(&true) {
        return;
    }
    // The keys extended just now expire `ttl` after `started`: so does the repaired one
    // (rounded up to the nodes' whole milliseconds).
    let left = plan.ttl.saturating_sub(started.elapsed());
    let left =
        Duration::from_millis(u64::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u64::MAX));
    if !left.is_zero() {
        crate::repair::run(shared, lease, &verdict.refused, left, plan.node_timeout).await;
    }
}

/// Releases `lease` on all nodes, each after its acquire attempt and its extend repairs still
/// in flight; `true` iff a quorum released a key holding the token.
pub(crate) async fn release(shared: &Arc<Shared>, lease: &Lease) -> Result<bool, LockError> {
    // No repair writes its note again after this.
    shared.forget_note(lease.token());
    let shared_lease = Arc::new(lease.clone());
    // Acquire attempts of this lease still in flight: release those nodes after them.
    let pending = shared.pending_acquires(lease.token());
    // Extend repairs of the name still in flight: release those nodes after them.
    let repairs = shared.repairing.in_flight(lease.name());
    let calls = shared.nodes.iter().enumerate().map(|(i, node)| {
        let (lock, lease) = (Arc::clone(&node.lock), Arc::clone(&shared_lease));
        let pending = pending.clone();
        let repairs: Vec<Pending> = repairs
            .iter()
            .filter(|repair| pending_on(repair, i))
            .cloned()
            .collect();
        async move {
            // Bounded by the round's deadline; each repair by its own node timeout.
            settled(repairs, i).await;
            if let Some(mut pending) = pending {
                // Bounded by the acquire's own node timeout, and by the round's deadline.
                // An error means the acquire round ended: nothing is pending.
                drop(
                    pending
                        .wait_for(|p| !p.get(i).copied().unwrap_or(false))
                        .await,
                );
            }
            (i, lock.as_ref().release(&lease).await)
        }
    });
    let deadline = Instant::now() + shared.release_timeout();
    let verdict = Fanout::new(shared, Op::Release, |released| *released, calls, deadline)
        .releasing(shared_lease)
        .decide(Until::All)
        .await;
    let (outcome, result) = match verdict.decision {
        Decision::Quorum => ("released", Ok(true)),
        Decision::NoQuorum if verdict.tally.refusals_block() => ("not_owned", Ok(false)),
        Decision::NoQuorum => ("no_quorum", Err(verdict.no_quorum(Op::Release))),
    };
    telemetry::quorum_outcome(Op::Release, outcome);
    result
}
