//! The stop margin and the at-risk signal: a lease whose renewals fail is given up (`lost()`)
//! its stop margin *before* `valid_until`, while the store still holds it, and says it is at
//! risk from the first failed renewal. Tokio's paused clock makes every instant exact.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{Probe, probe_locker};
use futures::FutureExt;
use lock_core::{LockError, Locker, default_stop_margin, metric};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tokio::time::{Instant, sleep};

const LEASE: Duration = Duration::from_secs(2);
const MARGIN: Duration = Duration::from_millis(500);

#[tokio::test(start_paused = true)]
async fn failing_renewals_give_the_lease_up_a_stop_margin_before_it_ends() {
    let (probe, locker) = probe_locker(LEASE);
    let guard = locker
        .lock("job")
        .lease(LEASE)
        .stop_margin(MARGIN)
        .await
        .expect("free");
    assert_eq!(guard.stop_margin(), MARGIN);
    probe.failing.store(true, Ordering::SeqCst);
    guard.lost().await;
    let left = guard
        .valid_until()
        .saturating_duration_since(Instant::now());
    assert!(
        left >= Duration::from_millis(400),
        "lost() only {left:?} before valid_until"
    );
    assert!(!guard.is_held(), "a lost guard no longer claims the lock");
    assert!(probe.count(&probe.extends) >= 2, "the renewal was retried");
    // The store still holds the lease: the work stopped while the lock was still ours.
    probe.failing.store(false, Ordering::SeqCst);
    let other = locker.lock("job").try_acquire().await.expect("answers");
    assert!(
        other.is_none(),
        "the lease is still valid at the stop point"
    );
    sleep(left).await;
    assert!(
        locker
            .lock("job")
            .try_acquire()
            .await
            .expect("answers")
            .is_some(),
        "free once valid_until passed"
    );
}

#[tokio::test(start_paused = true)]
async fn the_at_risk_signal_fires_at_the_first_failed_renewal_and_heals() {
    let (probe, locker) = probe_locker(LEASE);
    let guard = locker.lock("job").await.expect("free");
    let at_risk = guard.at_risk();
    assert!(
        at_risk.now_or_never().is_none(),
        "not at risk while renewals succeed"
    );
    sleep(LEASE).await;
    assert!(!guard.is_at_risk(), "renewed twice without a failure");
    probe.failing.store(true, Ordering::SeqCst);
    let before = probe.count(&probe.extends);
    guard.at_risk().await;
    assert_eq!(
        probe.count(&probe.extends),
        before + 1,
        "at risk right after the first failed renewal"
    );
    assert!(guard.is_at_risk());
    assert!(guard.is_held(), "at risk is not lost");
    assert!(guard.lost().now_or_never().is_none());
    probe.failing.store(false, Ordering::SeqCst);
    sleep(Duration::from_millis(250)).await; // the retry, 200 ms after the failure
    assert!(!guard.is_at_risk(), "a successful renewal ends the risk");
    assert!(guard.at_risk().now_or_never().is_none());
    guard.release().await.expect("ours");
}

#[tokio::test(start_paused = true)]
async fn the_default_margin_is_a_fifth_of_the_lease_and_zero_gives_it_up() {
    let (_, locker) = probe_locker(LEASE);
    let fixed = locker.lock("a").fixed_ttl(LEASE).await.expect("free");
    assert_eq!(fixed.stop_margin(), default_stop_margin(LEASE));
    assert_eq!(default_stop_margin(LEASE), LEASE / 5);
    let started = Instant::now();
    fixed.lost().await;
    assert_eq!(started.elapsed(), LEASE - LEASE / 5);

    let none = locker
        .lock("b")
        .fixed_ttl(LEASE)
        .stop_margin(Duration::ZERO)
        .await
        .expect("free");
    let started = Instant::now();
    none.lost().await;
    assert_eq!(started.elapsed(), LEASE, "no margin: lost at valid_until");
}

#[tokio::test(start_paused = true)]
async fn the_locker_default_margin_applies_and_a_request_overrides_it() {
    let probe = Arc::new(Probe::default());
    let locker = Locker::builder(Arc::clone(&probe))
        .lease(LEASE)
        .stop_margin(Duration::from_millis(300))
        .build();
    let guard = locker.lock("a").await.expect("free");
    assert_eq!(guard.stop_margin(), Duration::from_millis(300));
    assert_eq!(
        guard.stop_at(),
        guard.valid_until() - Duration::from_millis(300)
    );
    let other = locker
        .lock("b")
        .stop_margin(Duration::from_millis(100))
        .await
        .expect("free");
    assert_eq!(other.stop_margin(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn a_margin_not_shorter_than_the_lease_is_refused_before_any_io() {
    let (probe, locker) = probe_locker(LEASE);
    for margin in [LEASE, LEASE * 2] {
        let refused = locker.lock("job").stop_margin(margin).await;
        assert!(
            matches!(refused, Err(LockError::InvalidInput { .. })),
            "{refused:?}"
        );
    }
    let refused = locker
        .lock_all(["a", "b"])
        .fixed_ttl(Duration::from_millis(100))
        .stop_margin(Duration::from_millis(100))
        .await;
    assert!(
        matches!(refused, Err(LockError::InvalidInput { .. })),
        "{refused:?}"
    );
    assert_eq!(probe.count(&probe.attempts), 0, "nothing was sent");
}

#[tokio::test(start_paused = true)]
async fn run_cancels_the_work_at_the_stop_point() {
    let (probe, locker) = probe_locker(LEASE);
    let probe2 = Arc::clone(&probe);
    let ended = locker
        .lock("job")
        .stop_margin(MARGIN)
        .run(|watch| async move {
            probe2.failing.store(true, Ordering::SeqCst);
            loop {
                // The work checks nothing: `run` must cancel it.
                sleep(Duration::from_millis(10)).await;
                assert!(
                    watch.valid_until() > Instant::now() + Duration::from_millis(400),
                    "the work ran into the stop margin"
                );
            }
        })
        .await;
    assert!(matches!(ended, Err(LockError::Lost { .. })), "{ended:?}");
}

#[test]
fn at_risk_and_stop_margin_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let (probe, locker) = probe_locker(LEASE);
            let guard = locker.lock("job").label("job:{id}").await.expect("free");
            probe.failing.store(true, Ordering::SeqCst);
            guard.lost().await;
            // Without a margin the stop point is the lease's end: the work is told as the
            // lease runs out, not while it is still valid, and that is no margin reached.
            probe.failing.store(false, Ordering::SeqCst);
            let bare = locker
                .lock("bare")
                .label("job:{id}")
                .stop_margin(Duration::ZERO)
                .await
                .expect("free");
            probe.failing.store(true, Ordering::SeqCst);
            bare.lost().await;
        });
    });
    let snapshot = snapshotter.snapshot().into_vec();
    let count = |name: &str| {
        snapshot
            .iter()
            .find_map(|(key, _, _, value)| {
                let key = key.key();
                let ours = key.name() == name
                    && key
                        .labels()
                        .any(|l| l.key() == "lock" && l.value() == "job:{id}");
                match value {
                    DebugValue::Counter(n) if ours => Some(*n),
                    _ => None,
                }
            })
            .unwrap_or(0)
    };
    assert_eq!(
        count(metric::AT_RISK_TOTAL),
        2,
        "one spell of failures each"
    );
    assert_eq!(
        count(metric::STOP_MARGIN_REACHED_TOTAL),
        1,
        "the margin of the first lease, none for the one without"
    );
    assert_eq!(count(metric::LOST_TOTAL), 2);
}
