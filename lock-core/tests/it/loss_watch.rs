//! A backend's loss watch (`Lock::watch_loss`): the `Locker` asks for one per grant, keeps it
//! while the guard holds, marks the lease lost when the backend calls back, and ends the watch
//! with the hold, so that a call after the release changes nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::Lock;
use lock_core::backend::{Attempt, LossWatch, OnLoss};
use lock_core::{Lease, LockError, Locker, MemoryLock, Token};
use tokio::time::Instant;

/// A memory lock whose loss watches the test fires by hand; a watch's slot empties when the
/// `Locker` drops it.
#[derive(Default)]
struct Watched {
    inner: MemoryLock,
    watches: Mutex<Vec<(Arc<OnLoss>, std::sync::Weak<()>)>>,
}

impl Watched {
    /// Calls every watch's callback; returns how many were still kept by the `Locker`.
    fn fire_all(&self) -> usize {
        let watches = self.watches.lock().expect("lock");
        let mut live = 0;
        for (on_loss, kept) in watches.iter() {
            if kept.strong_count() > 0 {
                live += 1;
            }
            on_loss();
        }
        live
    }
}

#[async_trait]
impl Lock for Watched {
    fn backend(&self) -> &'static str {
        "watched"
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.inner.try_acquire(name, token, ttl).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.inner.extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.inner.release(lease).await
    }
    fn watch_loss(&self, _lease: &Lease, on_loss: OnLoss) -> Option<LossWatch> {
        let kept = Arc::new(());
        let mut watches = self.watches.lock().expect("lock");
        watches.push((Arc::new(on_loss), Arc::downgrade(&kept)));
        Some(LossWatch::new(kept))
    }
}

#[tokio::test]
async fn the_backends_call_marks_the_lease_lost_at_once() {
    let lock = Arc::new(Watched::default());
    let locker = Locker::builder(Arc::clone(&lock))
        .lease(Duration::from_secs(30))
        .build();
    let guard = locker.lock("job").await.expect("free");
    assert!(guard.is_held());
    assert_eq!(
        lock.fire_all(),
        1,
        "the watch is kept while the guard holds"
    );
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fired on the backend's call, long before any renewal");
    assert!(!guard.is_held());
}

#[tokio::test]
async fn the_watch_ends_with_the_hold() {
    let lock = Arc::new(Watched::default());
    let locker = Locker::builder(Arc::clone(&lock))
        .lease(Duration::from_secs(30))
        .build();
    let guard = locker.lock("job").await.expect("free");
    let lost = guard.lost();
    guard.release().await.expect("ours");
    // The release's own deletion, reported late: the watch is gone, and nothing is lost.
    assert_eq!(lock.fire_all(), 0, "the release dropped the watch");
    let again = locker.lock("job").await.expect("free again");
    assert!(again.is_held());
    assert!(
        tokio::time::timeout(Duration::from_millis(100), lost)
            .await
            .is_err(),
        "a released lease is not reported lost"
    );
    again.release().await.expect("ours");
}
