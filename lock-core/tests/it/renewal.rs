//! The watchdog: renewed leases outlive many TTLs, stop renewing before release, and report
//! loss. Tokio's paused clock makes every duration here exact.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::probe_locker;
use futures::FutureExt;
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_millis(300);

/// The default stop margin of `LEASE`: a fifth of it.
const MARGIN: Duration = Duration::from_millis(60);

#[tokio::test(start_paused = true)]
async fn a_renewed_lease_outlives_many_ttls() {
    let (probe, locker) = probe_locker(LEASE);
    let guard = locker.lock("job").await.expect("free");
    assert!(guard.is_renewing());
    for _ in 0..10 {
        sleep(LEASE).await;
        assert!(
            locker
                .lock("job")
                .try_acquire()
                .await
                .expect("ok")
                .is_none(),
            "still held"
        );
        assert!(guard.is_held());
        assert!(
            guard.remaining() > LEASE / 2,
            "renewed every third of the lease"
        );
    }
    assert!(
        probe.count(&probe.extends) >= 25,
        "renewed about every 100 ms over 3 s"
    );
    guard.release().await.expect("ok");
    assert_eq!(probe.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_fixed_ttl_is_not_renewed_and_is_lost_at_its_end() {
    let (probe, locker) = probe_locker(LEASE);
    let guard = locker.lock("job").fixed_ttl(LEASE).await.expect("free");
    assert!(!guard.is_renewing());
    let started = Instant::now();
    guard.lost().await;
    assert_eq!(
        started.elapsed(),
        LEASE - MARGIN,
        "lost() at valid_until less the default stop margin"
    );
    assert!(!guard.is_held());
    assert_eq!(probe.count(&probe.extends), 0);
}

#[tokio::test(start_paused = true)]
async fn a_manual_extend_moves_the_loss() {
    let (_, locker) = probe_locker(LEASE);
    let mut guard = locker.lock("job").fixed_ttl(LEASE).await.expect("free");
    sleep(LEASE / 2).await;
    guard.extend(LEASE).await.expect("ours");
    let started = Instant::now();
    guard.lost().await;
    assert_eq!(
        started.elapsed(),
        LEASE - MARGIN,
        "lost() followed the extended validity"
    );
}

#[tokio::test(start_paused = true)]
async fn renewal_never_reaches_the_backend_after_release() {
    let (probe, locker) = probe_locker(LEASE);
    // Every renewal takes 80 ms; release in the middle of one.
    *probe.extend_delay.lock().expect("lock") = Duration::from_millis(80);
    let guard = locker.lock("job").await.expect("free");
    sleep(LEASE / 3 + Duration::from_millis(40)).await; // a renewal is in flight now
    assert_eq!(probe.count(&probe.extends), 1, "the renewal started");
    guard.release().await.expect("ok");
    sleep(LEASE * 5).await;
    assert_eq!(probe.count(&probe.extends), 1, "no renewal after release");
    assert_eq!(
        probe.count(&probe.extends_after_release),
        0,
        "the release waited for the renewal in flight"
    );
    assert_eq!(probe.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_renewed_guard_stops_renewal_and_releases() {
    let (probe, locker) = probe_locker(LEASE);
    drop(locker.lock("job").await.expect("free"));
    sleep(LEASE * 5).await;
    assert_eq!(probe.count(&probe.extends), 0);
    assert_eq!(probe.inner.held_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_stolen_lease_is_lost_at_the_next_renewal() {
    let (probe, locker) = probe_locker(LEASE);
    let guard = locker.lock("job").await.expect("free");
    let lost = guard.lost();
    sleep(LEASE / 2).await;
    probe.stolen.store(true, Ordering::SeqCst);
    let started = Instant::now();
    lost.await;
    assert!(
        started.elapsed() <= LEASE / 3,
        "found at the next renewal: {:?}",
        started.elapsed()
    );
    assert!(!guard.is_held() && !guard.is_renewing());
}

#[tokio::test(start_paused = true)]
async fn failing_renewals_are_retried_until_the_lease_runs_out() {
    let (probe, locker) = probe_locker(LEASE);
    let guard = locker.lock("job").await.expect("free");
    probe.failing.store(true, Ordering::SeqCst);
    let valid_until = guard.valid_until();
    guard.lost().await;
    assert_eq!(
        Instant::now(),
        valid_until - MARGIN,
        "lost at the stop point, while the lease is still valid"
    );
    assert!(probe.count(&probe.extends) >= 2, "the failure was retried");
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_that_heals_keeps_the_lease() {
    let (probe, locker) = probe_locker(LEASE);
    let guard = locker.lock("job").await.expect("free");
    probe.failing.store(true, Ordering::SeqCst);
    sleep(LEASE / 3 + Duration::from_millis(50)).await;
    probe.failing.store(false, Ordering::SeqCst);
    sleep(LEASE * 3).await;
    assert!(guard.is_held(), "the lease survived the failed renewals");
    assert!(guard.lost().now_or_never().is_none());
}

#[tokio::test(start_paused = true)]
async fn max_hold_caps_renewal() {
    let (_, locker) = probe_locker(LEASE);
    let guard = locker
        .lock("job")
        .max_hold(Duration::from_secs(1))
        .await
        .expect("free");
    let started = Instant::now();
    guard.lost().await;
    let held = started.elapsed();
    assert!(
        held >= Duration::from_secs(1) - MARGIN && held <= Duration::from_secs(1) + LEASE,
        "held {held:?}"
    );
    // The lease itself runs out a stop margin after `lost()`.
    sleep(MARGIN).await;
    assert!(
        locker
            .lock("job")
            .try_acquire()
            .await
            .expect("ok")
            .is_some(),
        "free once the capped lease ran out"
    );
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_leases_renew_in_batches() {
    let (probe, locker) = probe_locker(LEASE);
    let mut guards = Vec::with_capacity(10_000);
    for i in 0..10_000 {
        guards.push(locker.lock(format!("n{i}")).await.expect("free"));
    }
    sleep(Duration::from_secs(1)).await;
    assert!(guards.iter().all(lock_core::Guard::is_held));
    let (extends, batches) = (
        probe.count(&probe.extends),
        probe.count(&probe.extend_batches),
    );
    assert!(
        extends >= 10_000 * 8,
        "every lease renewed about every 100 ms: {extends}"
    );
    assert!(
        batches <= 10 * 12,
        "one batch per 1,024 due leases, not one call per lease: {batches}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_granted_after_the_timer_is_armed_is_renewed_on_its_own_schedule() {
    // The watchdog armed its timer for the first lease (due at 100 ms); the second lease is due
    // at 150 ms and must be renewed then, not at the watchdog's next wake-up after it.
    let (_, locker) = probe_locker(LEASE);
    let start = Instant::now();
    let _first = locker.lock("a").await.expect("free");
    sleep(Duration::from_millis(50)).await;
    let second = locker.lock("b").await.expect("free");
    sleep(Duration::from_millis(110)).await; // now = 160 ms
    assert_eq!(
        second.valid_until() - start,
        Duration::from_millis(150) + LEASE,
        "renewed at 150 ms, a third of its lease after its grant"
    );
}

#[tokio::test(start_paused = true)]
async fn a_guard_is_renewed_after_its_locker_handle_is_dropped() {
    let (probe, locker) = probe_locker(Duration::from_millis(300));
    let guard = locker.lock("job").await.expect("free");
    drop(locker); // the guard keeps the locker, and so its watchdog, alive
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(guard.is_held(), "renewed ten leases long");
    assert!(probe.count(&probe.extends) >= 9);
    guard.release().await.expect("ours");
}

/// A store that answers a renewal with less validity than asked (30 % of it) is renewed again
/// halfway to the holder's stop point, not a third of the lease later: the holder keeps the
/// lock and is never past its stop point.
#[tokio::test(start_paused = true)]
async fn a_store_that_gives_less_than_asked_is_renewed_before_the_stop_point() {
    let (probe, locker) = probe_locker(Duration::from_secs(3));
    probe.short_answers.store(true, Ordering::SeqCst);
    let guard = locker.lock("job").await.expect("free");
    for _ in 0..50 {
        sleep(Duration::from_millis(100)).await;
        assert!(
            guard.is_held(),
            "past its stop point at {:?}",
            guard.remaining()
        );
    }
    guard.release().await.expect("ours");
}
