//! Extend repair: after a quorum extend, the nodes that answered "not ours" are sent the
//! lease's own token with the node's ordinary acquire (`SET NX PX` on a `RedisLock`), so a
//! node that restarted empty (or missed the acquire) holds the lease again instead of the
//! lease's footprint eroding node by node until one more loss breaks the quorum.
//! go-redsync/redsync#186 describes that erosion; their PR #149 did "extend or lock".
//!
//! Why the acquire and not a new operation: an extend's "not ours" does not tell "the key is
//! gone" from "another token holds it", and it need not. The acquire sets the key only if it is
//! absent, in one atomic step, so on a node where another token holds the key it answers busy
//! and changes nothing: a repair can never take a key from anyone. And it is the node's normal
//! grant path, so a node that grants nothing for now (a `RedisLock` in its grace period after
//! it saw data loss) refuses the repair as it refuses every grant.
//!
//! Why it is safe: it only follows an extend that a quorum granted, within the lease's
//! validity, so the lease is ours at that moment; writing our token on one more node can only
//! make another quorum harder to form. The node's fencing counter moves on (the lease keeps
//! its own fencing token): tokens still only grow.
//!
//! The note: a node repaired holds the key without the grant's note (a node that restarted
//! empty lost it), so observers could no longer count it for the grant. When the lease has a
//! note (`Redlock::annotate` keeps its record until the release), the repair writes it again on
//! that node right after the key, through the node's own `annotate`, within the same bound.
//!
//! Ordering with the release: the repair is registered under the lease's name, per node, until
//! it has finished there, and a release of that name sends its compare-and-delete to a node
//! only after the repair there (within the release's own timeout), so a repair never lands
//! after the release and strands our token on a node.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt as _};
use lock_core::Lease;
use lock_core::backend::Attempt;

use crate::node::bounded;
use crate::shared::Shared;
use crate::telemetry::Reply;

/// Sends `lease`'s token with the node's acquire for `ttl` to each node marked in `refused`,
/// each bounded by `timeout`, and waits for the answers; returns how many nodes now hold the
/// lease again. Counted under `op="repair"` in the node metrics.
///
/// # Cancel safety
/// Cancel safe: the repairs run in a task of their own, registered under the lease's name
/// until each has finished, so a release made after a drop still waits for them on each node.
pub(crate) async fn run(
    shared: &Arc<Shared>,
    lease: &Lease,
    refused: &[bool],
    ttl: Duration,
    timeout: Duration,
) -> usize {
    // Registered before anything is sent, and before the extend can return.
    let track = shared.repairing.track(lease.name(), refused.to_vec());
    let note = shared.note_of(lease.token());
    let shared_lease = Arc::new(lease.clone());
    let calls: FuturesUnordered<_> = refused
        .iter()
        .enumerate()
        .filter(|&(_, &refused)| refused)
        .map(|(i, _)| {
            let lock = Arc::clone(&shared.nodes[i].lock);
            let (lease, note) = (Arc::clone(&shared_lease), note.clone());
            async move {
                let (name, token) = (lease.name(), *lease.token());
                let answer = bounded(timeout, lock.as_ref().try_acquire(name, token, ttl)).await;
                if let (Ok(Attempt::Acquired(_)), Some(note)) = (&answer, note) {
                    // Part of the repair: a release of the name waits for it on this node. A
                    // failure leaves the node without the note, as before the repair.
                    let written = bounded(timeout, lock.as_ref().annotate(&lease, &note)).await;
                    if let Err(error) = written {
                        tracing::debug!(name, %error, "redlock repair could not write the note again");
                    }
                }
                (i, answer)
            }
        })
        .collect();
    let shared = Arc::clone(shared);
    let name = Arc::<str>::from(lease.name());
    let task = async move {
        let mut calls = calls;
        let mut repaired = 0;
        while let Some((i, answer)) = calls.next().await {
            let node = &shared.nodes[i];
            match answer {
                Ok(Attempt::Acquired(_)) => {
                    node.repaired(Ok(Reply::Yes));
                    repaired += 1;
                    tracing::info!(node = %node.label, name = %name, "redlock extend repaired a node that no longer held the lease");
                }
                Ok(Attempt::Busy { .. }) => node.repaired(Ok(Reply::No)),
                Err(error) => {
                    // A timed-out repair may still land: the key then holds our token and
                    // expires with the lease's TTL, like a late extend.
                    node.repaired(Err(&error));
                    tracing::debug!(node = %node.label, name = %name, %error, "redlock extend repair failed");
                }
            }
            track.done(i);
        }
        repaired
    };
    // A task of its own: a dropped extend must not leave the registration without its end.
    // (A join error means the runtime is shutting down: nothing was repaired that we know of.)
    tokio::spawn(task).await.unwrap_or(0)
}
