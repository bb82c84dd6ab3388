//! `Locker::adopt`: a leaked lease, kept as text across a "restart" (a new locker), becomes a
//! renewed guard again if the store still holds it, and only once.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::Probe;
use lock_core::{Lease, LockError, Locker};
use tokio::time::sleep;

const LEASE: Duration = Duration::from_millis(300);

fn locker_on(probe: &Arc<Probe>) -> Locker {
    Locker::builder(Arc::clone(probe)).lease(LEASE).build()
}

/// Takes `name` on one locker, leaks it and returns its text form (what a process would write
/// to disk before it exits).
async fn leaked(probe: &Arc<Probe>, name: &str) -> (String, u64) {
    let guard = locker_on(probe).lock(name).await.expect("free");
    let fence = guard.fencing_token();
    (guard.leak().to_string(), fence)
}

#[tokio::test(start_paused = true)]
async fn a_kept_lease_is_adopted_renewed_and_rotated() {
    let probe = Arc::new(Probe::default());
    probe.hands_over.store(true, Ordering::SeqCst);
    let (text, old_fence) = leaked(&probe, "job").await;
    let restarted = locker_on(&probe);
    let kept: Lease = text.parse().expect("a lease");
    let guard = restarted.adopt(kept.clone()).await.expect("still held");
    assert!(guard.is_renewing(), "an adopted guard is renewed");
    assert!(guard.fencing_token() > old_fence, "a new fencing token");
    assert_ne!(guard.lease().token(), kept.token(), "a new token");
    // Many leases later it is still held: the watchdog renews it.
    sleep(LEASE * 5).await;
    assert!(guard.is_held());
    assert!(
        restarted
            .lock("job")
            .try_acquire()
            .await
            .expect("answers")
            .is_none()
    );
    // The same text cannot be adopted twice, nor released by its old holder.
    let again = restarted.adopt(kept.clone()).await;
    assert!(
        matches!(again, Err(LockError::NotOwned { .. })),
        "{again:?}"
    );
    let late = restarted.release(&kept).await;
    assert!(matches!(late, Err(LockError::NotOwned { .. })), "{late:?}");
    guard.release().await.expect("ours");
    assert_eq!(probe.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_lease_that_ran_out_is_not_adopted() {
    let probe = Arc::new(Probe::default());
    probe.hands_over.store(true, Ordering::SeqCst);
    let (text, _) = leaked(&probe, "job").await;
    sleep(LEASE * 2).await;
    let extends = probe.count(&probe.extends);
    let refused = locker_on(&probe)
        .adopt(text.parse().expect("a lease"))
        .await;
    assert!(
        matches!(refused, Err(LockError::NotOwned { .. })),
        "{refused:?}"
    );
    assert_eq!(
        probe.count(&probe.extends),
        extends,
        "the hand-over said not owned: nothing more is asked of the store"
    );
    // Taken by someone else meanwhile: still not ours.
    let (text, _) = leaked(&probe, "other").await;
    sleep(LEASE * 2).await;
    let thief = locker_on(&probe).lock("other").await.expect("free again");
    let refused = locker_on(&probe)
        .adopt(text.parse().expect("a lease"))
        .await;
    assert!(
        matches!(refused, Err(LockError::NotOwned { .. })),
        "{refused:?}"
    );
    assert!(thief.is_held(), "the new holder was left alone");
}

#[tokio::test(start_paused = true)]
async fn without_hand_over_adopt_extends_in_place() {
    // A backend without hand-over (Redlock, PostgreSQL advisory): the same token, extended.
    let probe = Arc::new(Probe::default());
    let (text, fence) = leaked(&probe, "job").await;
    let kept: Lease = text.parse().expect("a lease");
    let guard = locker_on(&probe)
        .adopt(kept.clone())
        .lease(Duration::from_secs(2))
        .await
        .expect("still held");
    assert_eq!(guard.fencing_token(), fence);
    assert_eq!(guard.lease().token(), kept.token());
    sleep(Duration::from_secs(5)).await;
    assert!(guard.is_held(), "renewed");
    guard.release().await.expect("ours");
}

#[tokio::test(start_paused = true)]
async fn adopt_checks_its_input_before_any_io() {
    let probe = Arc::new(Probe::default());
    probe.hands_over.store(true, Ordering::SeqCst);
    let (text, _) = leaked(&probe, "job").await;
    let before = probe.count(&probe.extends) + probe.count(&probe.handovers);
    let refused = locker_on(&probe)
        .adopt(text.parse().expect("a lease"))
        .lease(Duration::from_millis(100))
        .stop_margin(Duration::from_millis(100))
        .await;
    assert!(
        matches!(refused, Err(LockError::InvalidInput { .. })),
        "{refused:?}"
    );
    assert_eq!(
        probe.count(&probe.extends) + probe.count(&probe.handovers),
        before
    );
    assert!("distlock-lease/1 mutex 1".parse::<Lease>().is_err());
}
