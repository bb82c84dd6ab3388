//! Revocation in the Locker, beyond the conformance module's rules: a lease that is not
//! revocable is never told; the request, its sighting and the holder's giving up are counted;
//! a backend that cannot name a grant refuses both sides before any I/O.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lock_core::backend::{Capabilities, Lock};
use lock_core::{LockError, Locker, MemoryLock, metric};
use metrics_util::debugging::DebugValue;
use tokio::time::{Instant, sleep, timeout};

use crate::common::{Declaring, Remote, recorded_while};

const LEASE: Duration = Duration::from_secs(3);

/// Two lockers over one store: the holder's process and the revoker's.
fn holder_and_revoker<L: Lock + 'static>(store: &Arc<L>) -> (Locker, Locker) {
    (
        Locker::new(Arc::clone(store)),
        Locker::new(Arc::clone(store)),
    )
}

#[tokio::test(start_paused = true)]
async fn a_lease_that_is_not_revocable_is_never_told() {
    let store = Arc::new(MemoryLock::new());
    let (holder, revoker) = holder_and_revoker(&store);
    let guard = holder.lock("job").lease(LEASE).await.expect("free");
    assert_eq!(
        revoker.revoke("job", None).await.expect("asked"),
        Some(guard.fencing_token())
    );
    sleep(LEASE * 2).await;
    assert!(!guard.is_revoked() && guard.is_held());
}

#[test]
fn requests_sightings_and_honoured_ones_are_counted() {
    let snapshot = recorded_while(async {
        let store = Arc::new(MemoryLock::new());
        let (holder, revoker) = (
            Locker::new(Arc::clone(&store)),
            Locker::new(Arc::clone(&store)),
        );
        let guard = holder
            .lock("job")
            .lease(LEASE)
            .revocable()
            .await
            .expect("free");
        let asked = Instant::now();
        revoker.revoke("job", Some("deploy")).await.expect("asked");
        timeout(LEASE, guard.revoked()).await.expect("told");
        assert!(
            asked.elapsed() <= LEASE / 3 + Duration::from_millis(10),
            "told at the next renewal: {:?}",
            asked.elapsed()
        );
        assert_eq!(guard.revocation_note().as_deref(), Some("deploy"));
        guard.release().await.expect("honoured");
    });
    for event in ["sent", "seen", "honoured"] {
        let count = snapshot.iter().find_map(|(key, _, _, value)| {
            let key = key.key();
            (key.name() == metric::REVOCATIONS_TOTAL
                && key
                    .labels()
                    .any(|l| l.key() == "event" && l.value() == event))
            .then_some(value)
        });
        assert!(
            matches!(count, Some(DebugValue::Counter(1))),
            "{event}: {count:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_backend_that_cannot_name_a_grant_refuses_both_sides() {
    // A backend whose holders are not described: it cannot name a grant.
    let locker = Locker::new(Declaring::new("silent", Capabilities::MUTEX));
    for answer in [
        locker.revoke("job", None).await.map(drop),
        locker.lock("job").revocable().try_acquire().await.map(drop),
    ] {
        assert!(
            matches!(
                answer,
                Err(LockError::Unsupported {
                    backend: "silent",
                    kind: "revocation"
                })
            ),
            "{answer:?}"
        );
    }
}

/// A request made long after the grant is seen at a renewal after it: the holder looks again
/// at every renewal, not only at the first.
#[tokio::test(start_paused = true)]
async fn a_request_made_later_is_seen_at_the_next_renewal() {
    let store = Arc::new(MemoryLock::new());
    let (holder, revoker) = holder_and_revoker(&store);
    let guard = holder
        .lock("job")
        .lease(LEASE)
        .revocable()
        .await
        .expect("free");
    sleep(LEASE * 2).await;
    assert!(!guard.is_revoked(), "nobody asked yet");
    let asked = Instant::now();
    revoker.revoke("job", None).await.expect("asked");
    timeout(LEASE, guard.revoked()).await.expect("told");
    assert!(asked.elapsed() <= LEASE / 3 + Duration::from_millis(10));
    guard.release().await.expect("ours");
}

/// Where the store announces releases, the revoker rings the grant's bell and the holder is
/// told at once, not at its next renewal; the holder's listener ends with its hold (no
/// subscription is left behind).
#[tokio::test(start_paused = true)]
async fn on_a_store_that_announces_releases_the_holder_is_told_at_once() {
    let store = Arc::new(MemoryLock::new());
    let remote = Remote::announcing(&store);
    let (holder, revoker) = holder_and_revoker(&remote);
    let guard = holder
        .lock("job")
        .lease(Duration::from_secs(30))
        .revocable()
        .await
        .expect("free");
    sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    revoker.revoke("job", None).await.expect("asked");
    timeout(Duration::from_secs(30), guard.revoked())
        .await
        .expect("told");
    assert!(
        asked.elapsed() < Duration::from_millis(100),
        "told {:?} after the request, with renewals every 10 s",
        asked.elapsed()
    );
    guard.release().await.expect("ours");

    // A hold that ends without a request: its listener ends too.
    let quiet = holder
        .lock("other")
        .lease(Duration::from_secs(30))
        .revocable()
        .await
        .expect("free");
    sleep(Duration::from_millis(100)).await;
    assert!(
        remote.watches_alive.load(Ordering::SeqCst) >= 1,
        "listening"
    );
    quiet.release().await.expect("ours");
    sleep(Duration::from_millis(100)).await;
    assert_eq!(
        remote.watches_alive.load(Ordering::SeqCst),
        0,
        "a subscription outlived its hold"
    );
}

/// A request names one grant: the holder of another name (or of another grant) is not told.
#[tokio::test(start_paused = true)]
async fn a_request_for_one_grant_tells_no_other_holder() {
    let store = Arc::new(MemoryLock::new());
    let remote = Remote::announcing(&store);
    let (holder, revoker) = holder_and_revoker(&remote);
    let asked = holder
        .lock("job")
        .lease(LEASE)
        .revocable()
        .await
        .expect("free");
    let other = holder
        .lock("other")
        .lease(LEASE)
        .revocable()
        .await
        .expect("free");
    revoker.revoke("job", None).await.expect("asked");
    timeout(LEASE, asked.revoked()).await.expect("told");
    sleep(LEASE * 2).await;
    assert!(!other.is_revoked(), "the holder of another name was told");
    asked.release().await.expect("ours");
    other.release().await.expect("ours");
}
