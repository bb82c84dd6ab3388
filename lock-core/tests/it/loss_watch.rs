//! A backend's loss watch (`Lock::watch_loss`): the `Locker`'s watchdog asks for one per hold
//! still running when it takes the lease in (at once for the first hold of an idle locker,
//! within about a second otherwise), keeps it while the guard holds, marks the lease lost when
//! the backend calls back, and ends the watch with the hold, so that a call after the release
//! changes nothing. Short holds never cost a watch.

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
    /// How many watches the `Locker` asked for.
    fn asked(&self) -> usize {
        self.watches.lock().expect("lock").len()
    }

    /// Waits (bounded: at most 5 s, in 10 ms steps) until the `Locker` asked for `count`
    /// watches.
    async fn wait_asked(&self, count: usize) {
        for _ in 0..500 {
            if self.asked() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "the locker asked for {} watch(es), not {count}",
            self.asked()
        );
    }

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
    lock.wait_asked(1).await;
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
    lock.wait_asked(1).await;
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

/// Holds that end before the watchdog takes them in are never watched: a tight loop of grants
/// and releases asks the backend for a watch once or twice (the first hold of an idle locker,
/// and one caught by a look of the watchdog), not once per grant.
#[tokio::test]
async fn short_holds_cost_no_watch() {
    let lock = Arc::new(Watched::default());
    let locker = Locker::builder(Arc::clone(&lock))
        .lease(Duration::from_secs(30))
        .build();
    for _ in 0..200 {
        let guard = locker.lock("job").await.expect("free");
        guard.release().await.expect("ours");
    }
    assert!(
        lock.asked() <= 3,
        "200 short holds asked for {} watches",
        lock.asked()
    );
    // A hold that lasts is watched, within the watchdog's next look.
    let before = lock.asked();
    let held = locker.lock("job").await.expect("free");
    lock.wait_asked(before + 1).await;
    held.release().await.expect("ours");
}
