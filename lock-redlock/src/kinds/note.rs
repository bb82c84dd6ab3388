//! Observers over a quorum: the holder's note written on every node
//! ([`annotate`], through each node's own `annotate`), and the holder read from every node and
//! decided by a quorum ([`describe`], through each node's own `describe_holder`). What the
//! nodes' answers decide is counted in `crate::holders`; the record that names the grant on
//! each node is `crate::record`.
//!
//! The Redis distributed-locks page
//! (<https://redis.io/docs/latest/develop/use/patterns/distributed-locks/>) defines only
//! acquire, extend and release: a lock is held when a majority of the N independent masters
//! hold its key with the holder's value. Reading the holder follows the same rule. A grant
//! holds the lock when a quorum of nodes holds its token; a node does not tell the token, but
//! it shows a note only beside the grant it was written for, and the note a Redlock writes
//! names its grant (a digest of the token, and the lease's fencing token). So "a quorum of
//! nodes shows a note naming grant G" means "a quorum of nodes held G's token when read".
//!
//! What it guarantees:
//! - the term reported is the Redlock lease's fencing token (what the holder's
//!   `Guard::fencing_token` says), never a node's own: observers and the leader agree on it,
//!   and it rises across leaders as far as Redlock's tokens do (README, "Fencing tokens");
//! - in one read at most one grant is named by a quorum (each node names one at most);
//! - a note is never shown with another grant than the one it was written for;
//! - a minority of nodes — down, slow, free, or holding any other key — does not change a
//!   grant named by a quorum.
//!
//! What it does not:
//! - one atomic read of all N: the nodes are read at once but each at its own moment, so
//!   during a hand-over two reads may see the old holder, nobody, or a holder without a term;
//! - that the holder still holds when the answer arrives (no read can): its TTL is reported
//!   less the round's time and the drift allowance;
//! - a term for a grant that wrote no note (a plain lock, a leader before its record), or
//!   whose note a quorum of the nodes answering does not carry (nodes lost it, or its first
//!   write is in flight): such a holder is reported with term 0 and no note.

use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt as _};
use lock_core::backend::Holder;
use lock_core::{Lease, LockError, Op, TimeoutPhase};
use tokio::time::Instant;

use crate::holders::{Described, Reading};
use crate::record;
use crate::round::{Fanout, Until};
use crate::shared::Shared;
use crate::tally::{Decision, drift};
use crate::telemetry::{self, ANNOTATE, DESCRIBE, Reply};

/// Writes `note` beside `lease` on all N nodes at once, each through its own `annotate` with
/// the lease (the same token on every node), as a record naming the grant (`crate::record`).
/// `Ok(true)` iff a quorum wrote it; `Ok(false)` iff the refusals alone rule that out (the
/// lease is no longer ours on too many nodes); else a quorum error. Waits, like a release, for
/// every node that is not lagging, up to the release timeout, so the note is on every healthy
/// node when it returns; the rest is seen through in the background. The record is kept (in
/// `Shared`) until the lease is released, so an extend that repairs a node writes it there too.
pub(crate) async fn annotate(
    shared: &Arc<Shared>,
    lease: &Lease,
    note: &[u8],
) -> Result<bool, LockError> {
    record::check(note)?;
    let record: Arc<[u8]> = Arc::from(record::seal(lease, note));
    // Kept for the extend's repairs (a node that restarted empty gets it again with the key).
    shared.keep_note(*lease.token(), Arc::clone(&record));
    let shared_lease = Arc::new(lease.clone());
    let calls = shared.nodes.iter().enumerate().map(|(i, node)| {
        let (lock, lease, record) = (
            Arc::clone(&node.lock),
            Arc::clone(&shared_lease),
            Arc::clone(&record),
        );
        async move { (i, lock.as_ref().annotate(&lease, &record).await) }
    });
    let deadline = Instant::now() + shared.release_timeout();
    let verdict = Fanout::new(shared, Op::Extend, |written| *written, calls, deadline)
        .counted_as(ANNOTATE)
        .decide(Until::All)
        .await;
    let (outcome, result) = match verdict.decision {
        Decision::Quorum => ("written", Ok(true)),
        Decision::NoQuorum if verdict.tally.refusals_block() => {
            shared.forget_note(lease.token());
            ("not_owned", Ok(false))
        }
        Decision::NoQuorum => ("no_quorum", Err(verdict.no_quorum(Op::Extend))),
    };
    telemetry::quorum_outcome_in(ANNOTATE, outcome);
    result
}

/// Reads the holder of `name` on all N nodes at once, each bounded by the release timeout,
/// and decides as `crate::holders` says: answers as soon as the nodes still out cannot change
/// the answer, else once every node answered or the timeout passed. The reads still out then
/// are dropped (a read changes nothing). The TTL reported is the one decided, less the time
/// the round took and the drift allowance of that TTL.
pub(crate) async fn describe(
    shared: &Arc<Shared>,
    name: &str,
) -> Result<Option<Holder>, LockError> {
    let started = Instant::now();
    let deadline = started + shared.release_timeout();
    let mut reads: FuturesUnordered<_> = shared
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| async move { (i, node.lock.as_ref().describe_holder(name).await) })
        .collect();
    let mut reading = Reading::new(shared.nodes.len());
    let mut answered = vec![false; shared.nodes.len()];
    let described = loop {
        if let Some(settled) = reading.settled() {
            break settled;
        }
        match tokio::time::timeout_at(deadline, reads.next()).await {
            Ok(Some((i, answer))) => {
                answered[i] = true;
                let reply = answer.as_ref().map(|holder| {
                    if holder.is_some() {
                        Reply::Yes
                    } else {
                        Reply::No
                    }
                });
                shared.nodes[i].answered_in(DESCRIBE, reply);
                if let Err(error) = &answer {
                    tracing::debug!(node = %shared.nodes[i].label, name, %error, "redlock node describe_holder failed");
                }
                reading.seen(answer);
            }
            Ok(None) => break reading.decide(),
            Err(_) => {
                for (i, _) in answered.iter().enumerate().filter(|(_, a)| !**a) {
                    let error = LockError::Timeout {
                        phase: TimeoutPhase::Command,
                        elapsed: started.elapsed(),
                    };
                    shared.nodes[i].answered_in(DESCRIBE, Err(&error));
                    reading.seen(Err(error));
                }
                break reading.decide();
            }
        }
    };
    let elapsed = started.elapsed();
    let config = &shared.config;
    // What the round took and the drift allowance, off the TTL decided: the keys it was read
    // from expire no later than that, by this process's clock.
    let conservative = |mut holder: Holder| {
        holder.ttl = holder.ttl.map(|ttl| {
            ttl.saturating_sub(elapsed).saturating_sub(drift(
                ttl,
                config.drift_factor,
                config.drift_constant,
            ))
        });
        holder
    };
    let (outcome, result) = match described {
        Described::Grant(holder) => ("held", Ok(Some(conservative(holder)))),
        Described::Unnamed(holder) => ("unnamed", Ok(Some(conservative(holder)))),
        Described::Nobody => ("nobody", Ok(None)),
        Described::Undecided => {
            let (tally, first) = reading.tally();
            let error = crate::QuorumNotReached::new(Op::Acquire, &tally, first)
                .into_lock_error(!tally.fatal_blocks());
            ("no_quorum", Err(error))
        }
    };
    telemetry::quorum_outcome_in(DESCRIBE, outcome);
    result
}
