//! Release announcements over N nodes: one signal, bumped whenever any node announces a release.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use lock_core::LockError;
use lock_core::backend::{ReleaseSignal, ReleaseWatch};
use tokio::task::JoinHandle;

use crate::node::bounded;
use crate::shared::Shared;

/// Subscribes to the releases of `name` on every node (each bounded by `timeout`).
///
/// A Redlock release is a release on at least a quorum of nodes, so with subscriptions on at
/// least `N − quorum + 1` nodes one of them is among every quorum that releases: the combined
/// signal then misses no release (only expiries, which the `Locker` handles through the holder's
/// TTL). With fewer, `Ok(None)`: waiters poll.
pub(crate) async fn watch(
    shared: &Arc<Shared>,
    name: &str,
    timeout: Duration,
) -> Result<Option<ReleaseWatch>, LockError> {
    let n = shared.nodes.len();
    let needed = n - crate::tally::quorum(n) + 1;
    let answers = join_all(shared.nodes.iter().map(|node| async move {
        let watch = bounded(timeout, node.lock.as_ref().watch(name))
            .await
            .ok()
            .flatten()?;
        // The node's count as its subscription came into force: a release from here on is
        // forwarded, even one announced before the forwarding task first runs.
        let seen = watch.signal().generation();
        Some((watch, seen))
    }))
    .await;
    let watches: Vec<(ReleaseWatch, u64)> = answers.into_iter().flatten().collect();
    if watches.len() < needed {
        return Ok(None);
    }
    let signal = ReleaseSignal::new();
    let forwarders = watches
        .into_iter()
        .map(|(watch, seen)| tokio::spawn(forward(watch, seen, signal.clone())))
        .collect();
    Ok(Some(ReleaseWatch::new(signal, Forwarders(forwarders))))
}

/// Bumps `to` after every bump of `from`'s signal past `seen` (coalescing bumps that come
/// together), for as long as it runs; holds the node's subscription.
async fn forward(from: ReleaseWatch, mut seen: u64, to: ReleaseSignal) {
    loop {
        from.signal().changed_since(seen).await;
        seen = from.signal().generation();
        to.notify();
    }
}

/// The forwarding tasks of one combined watch: dropping the watch stops them, which drops the
/// nodes' subscriptions.
struct Forwarders(Vec<JoinHandle<()>>);

impl Drop for Forwarders {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}
