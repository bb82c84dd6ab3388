//! Releases still in flight, per lock name, so that the next acquire of the name sends its
//! attempt to a node only once that node has answered the release (or given up on it).
//!
//! A `release` returns once every node that is not lagging answered, but some releases still
//! run after that: a release future dropped early, a lagging node's release (not waited for),
//! a node's release still out at the release timeout (one that waited for its lease's late
//! acquire there), and the cleanup of a failed acquire. An acquire
//! of the same name sent to such a node at once could reach it first and find our previous key
//! there: the node refuses, and the new lease rests on fewer nodes than are up. Ordering the two
//! per node costs nothing on healthy nodes (the release answers within a round trip), and
//! nothing on a hung node either: the acquire's attempt there is bounded by the node timeout,
//! as it would be anyway, and the quorum is decided by the other nodes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

/// Which nodes a release has not finished on: `true` at a node's index while its
/// compare-and-delete is in flight (or waiting to be sent).
pub(crate) type Pending = watch::Receiver<Vec<bool>>;

/// Per name, the releases still in flight, each with its id.
type ByName = HashMap<Arc<str>, Vec<(u64, Pending)>>;

/// The registry of the releases still in flight.
#[derive(Default)]
pub(crate) struct Releasing {
    by_name: Mutex<ByName>,
    next_id: AtomicU64,
}

impl Releasing {
    fn by_name(&self) -> MutexGuard<'_, ByName> {
        self.by_name.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a release of `name` pending on the nodes marked `true`. The returned track
    /// clears a node's mark with [`ReleaseTrack::done`] and unregisters the release when
    /// dropped (which also wakes every acquire still waiting on it).
    pub(crate) fn track(self: &Arc<Self>, name: &str, pending: Vec<bool>) -> ReleaseTrack {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let name: Arc<str> = Arc::from(name);
        let (sender, receiver) = watch::channel(pending);
        self.by_name()
            .entry(Arc::clone(&name))
            .or_default()
            .push((id, receiver));
        ReleaseTrack {
            registry: Arc::clone(self),
            name,
            id,
            sender,
        }
    }

    /// The releases of `name` in flight now (normally none: nothing is allocated then).
    pub(crate) fn in_flight(&self, name: &str) -> Vec<Pending> {
        let by_name = self.by_name();
        if by_name.is_empty() {
            return Vec::new();
        }
        by_name
            .get(name)
            .map(|releases| releases.iter().map(|(_, p)| p.clone()).collect())
            .unwrap_or_default()
    }

    /// How many names have a release in flight (for tests: the registry must not grow).
    #[cfg(test)]
    pub(crate) fn names(&self) -> usize {
        self.by_name().len()
    }
}

/// Waits until none of `releases` is still in flight on `node`. Each release's own bound (its
/// node timeout) bounds this; the caller adds its own.
pub(crate) async fn settled(releases: Vec<Pending>, node: usize) {
    for mut release in releases {
        // An error means the release round has ended: nothing of it is in flight any more.
        drop(
            release
                .wait_for(|pending| !pending.get(node).copied().unwrap_or(false))
                .await,
        );
    }
}

/// Whether `release` is still in flight on `node`.
pub(crate) fn pending_on(release: &Pending, node: usize) -> bool {
    release.borrow().get(node).copied().unwrap_or(false)
}

/// One release in flight, registered under its name until dropped.
pub(crate) struct ReleaseTrack {
    registry: Arc<Releasing>,
    name: Arc<str>,
    id: u64,
    sender: watch::Sender<Vec<bool>>,
}

impl ReleaseTrack {
    /// The release has finished on `node` (answered, failed or timed out).
    pub(crate) fn done(&self, node: usize) {
        self.sender.send_if_modified(|pending| {
            pending
                .get_mut(node)
                .is_some_and(|p| std::mem::replace(p, false))
        });
    }
}

impl Drop for ReleaseTrack {
    fn drop(&mut self) {
        let mut by_name = self.registry.by_name();
        if let Some(releases) = by_name.get_mut(&self.name) {
            releases.retain(|(id, _)| *id != self.id);
            if releases.is_empty() {
                by_name.remove(&self.name);
            }
        }
        // `sender` drops after this: any acquire still waiting on it proceeds.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_acquire_waits_only_for_the_nodes_still_releasing() {
        let registry = Arc::new(Releasing::default());
        assert!(registry.in_flight("a").is_empty());
        let track = registry.track("a", vec![true, false, true]);
        assert!(registry.in_flight("b").is_empty());
        let releases = registry.in_flight("a");
        assert_eq!(releases.len(), 1);
        assert!(pending_on(&releases[0], 0));
        assert!(!pending_on(&releases[0], 1));
        settled(releases.clone(), 1).await; // not pending there: at once
        let waiting = tokio::spawn(settled(releases.clone(), 2));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        track.done(2);
        waiting.await.expect("settled once node 2 finished");
        // Dropped: unregistered, and the waiters on node 0 go on.
        let waiting = tokio::spawn(settled(releases, 0));
        drop(track);
        waiting.await.expect("settled once the release ended");
        assert_eq!(registry.names(), 0);
    }

    #[test]
    fn overlapping_releases_of_one_name_unregister_separately() {
        let registry = Arc::new(Releasing::default());
        let first = registry.track("a", vec![true]);
        let second = registry.track("a", vec![true]);
        assert_eq!(registry.in_flight("a").len(), 2);
        drop(first);
        assert_eq!(registry.in_flight("a").len(), 1);
        drop(second);
        assert_eq!(registry.names(), 0);
    }
}
