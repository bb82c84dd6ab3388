//! `distlock_oldest_held_seconds`: a hold whose guard has not ended shows in the gauge, and
//! grows, before it is released — renewed or with a fixed TTL, also once that TTL has run out
//! (a stuck holder) — and the gauge falls back to 0 once the hold ends.
//!
//! Each test labels its requests with a template of its own: the gauge is the oldest hold of
//! the whole process (every watchdog files its holds in one table), so tests running side by
//! side in this binary must not share a series.

use std::time::Duration;

use lock_core::{Guard, Locker, MemoryLock, metric};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// The gauge of `label`'s mutex series on the memory backend, as last set.
fn oldest(snapshotter: &Snapshotter, label: &str) -> Option<f64> {
    gauge_in(&snapshotter.snapshot().into_vec(), label, "mutex")
}

/// The gauge of `label`'s series of `kind` on the memory backend in `snapshot` (one snapshot
/// for several series: taking it drains what changed).
fn gauge_in(
    snapshot: &[(
        metrics_util::CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )],
    label: &str,
    kind: &str,
) -> Option<f64> {
    snapshot.iter().find_map(|(key, _, _, value)| {
        let key = key.key();
        let labels: Vec<_> = key.labels().map(|l| (l.key(), l.value())).collect();
        let wanted = key.name() == metric::OLDEST_HELD_SECONDS
            && labels.contains(&("backend", "memory"))
            && labels.contains(&("lock", label))
            && labels.contains(&("kind", kind));
        match (wanted, value) {
            (true, DebugValue::Gauge(seconds)) => Some(seconds.into_inner()),
            _ => None,
        }
    })
}

/// Runs `scenario` with a locker over a `MemoryLock` (3 s leases) on a paused clock, recording
/// into a recorder of its own that `scenario` reads as it goes.
fn on_paused_clock<F: Future<Output = ()>>(scenario: impl FnOnce(Locker, Snapshotter) -> F) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let locker = Locker::builder(MemoryLock::new())
            .lease(Duration::from_secs(3))
            .build();
        runtime.block_on(scenario(locker, snapshotter));
    });
}

/// Holds `guard` without releasing it for 5 s then 10 s more: the gauge shows the hold, and
/// grows with it. Returns the guard, still held.
async fn held_without_release(guard: Guard, snapshotter: &Snapshotter, label: &str) -> Guard {
    tokio::time::sleep(Duration::from_secs(5)).await;
    let early = oldest(snapshotter, label).expect("the gauge is set while the guard is held");
    // Reported once a second: at 5 s the last report is at most a second old.
    assert!((4.0..=5.0).contains(&early), "{early} s after 5 s held");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let later = oldest(snapshotter, label).expect("still set");
    assert!(
        (14.0..=15.0).contains(&later) && later > early,
        "{later} s after 15 s held (was {early} s)"
    );
    guard
}

/// Within two report periods of the end of the last hold, the gauge is 0 again.
async fn back_to_zero(snapshotter: &Snapshotter, label: &str) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(oldest(snapshotter, label), Some(0.0), "the hold ended");
}

#[test]
fn a_renewed_hold_shows_while_it_lasts_and_falls_to_zero_after_release() {
    const LABEL: &str = "oldest-renewed:{id}";
    on_paused_clock(|locker, snapshotter| async move {
        let guard = locker.lock("job:1").label(LABEL).await.expect("free");
        let guard = held_without_release(guard, &snapshotter, LABEL).await;
        assert!(!guard.lease().is_expired(), "renewed all along");
        guard.release().await.expect("still ours");
        back_to_zero(&snapshotter, LABEL).await;
    });
}

#[test]
fn a_fixed_ttl_hold_shows_while_it_lasts_and_falls_to_zero_after_release() {
    const LABEL: &str = "oldest-fixed:{id}";
    on_paused_clock(|locker, snapshotter| async move {
        let guard = locker
            .lock("job:1")
            .label(LABEL)
            .fixed_ttl(Duration::from_secs(60))
            .await
            .expect("free");
        let guard = held_without_release(guard, &snapshotter, LABEL).await;
        guard.release().await.expect("within its TTL");
        back_to_zero(&snapshotter, LABEL).await;
    });
}

/// A fixed-TTL holder stuck past its TTL: the lease ran out in the store, but the guard's work
/// still runs. The gauge keeps showing it until the guard ends — here by a drop.
#[test]
fn a_fixed_ttl_holder_stuck_past_its_ttl_still_shows() {
    const LABEL: &str = "oldest-stuck:{id}";
    on_paused_clock(|locker, snapshotter| async move {
        let guard = locker
            .lock("job:1")
            .label(LABEL)
            .fixed_ttl(Duration::from_secs(2))
            .await
            .expect("free");
        let guard = held_without_release(guard, &snapshotter, LABEL).await;
        assert!(guard.lease().is_expired(), "its 2 s ran out long ago");
        drop(guard);
        back_to_zero(&snapshotter, LABEL).await;
    });
}

/// Two holds of one series: the gauge follows the older, then the younger once the older ends.
#[test]
fn the_gauge_is_the_oldest_of_the_series_holds() {
    const LABEL: &str = "oldest-two:{id}";
    on_paused_clock(|locker, snapshotter| async move {
        let old = locker.lock("job:1").label(LABEL).await.expect("free");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let young = locker
            .lock("job:2")
            .label(LABEL)
            .fixed_ttl(Duration::from_secs(60))
            .await
            .expect("free");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let both = oldest(&snapshotter, LABEL).expect("set");
        assert!((14.0..=15.0).contains(&both), "the older hold: {both} s");
        old.release().await.expect("ours");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let one = oldest(&snapshotter, LABEL).expect("set");
        assert!((6.0..=7.0).contains(&one), "the younger hold: {one} s");
        young.release().await.expect("ours");
        back_to_zero(&snapshotter, LABEL).await;
    });
}

/// Holds of several series at once, granted in turn (so neighbouring holds belong to different
/// series): each series' gauge shows its own oldest hold — another label, or the same label of
/// another kind, is another series.
#[test]
fn each_series_shows_its_own_oldest_hold() {
    const A: &str = "series-a:{id}";
    const B: &str = "series-b:{id}";
    on_paused_clock(|locker, snapshotter| async move {
        let a1 = locker.lock("a:1").label(A).await.expect("free");
        tokio::time::sleep(Duration::from_secs(10)).await;
        let b1 = locker.lock("b:1").label(B).await.expect("free");
        let a2 = locker.lock("a:2").label(A).await.expect("free");
        let read = locker.read("a:3").label(A).await.expect("free");
        let b2 = locker.lock("b:2").label(B).await.expect("free");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let snapshot = snapshotter.snapshot().into_vec();
        let a = gauge_in(&snapshot, A, "mutex").expect("set");
        let b = gauge_in(&snapshot, B, "mutex").expect("set");
        let r = gauge_in(&snapshot, A, "read").expect("set");
        assert!((14.0..=15.0).contains(&a), "A's oldest hold: {a} s");
        assert!((4.0..=5.0).contains(&b), "B's oldest hold: {b} s");
        assert!((4.0..=5.0).contains(&r), "A's reads: {r} s");
        for guard in [a1, b1, a2, read, b2] {
            guard.release().await.expect("ours");
        }
    });
}

/// At the size at which the watchdog sweeps the leases it watches of the ended ones (64), the
/// holds still held stay in the gauge.
#[test]
fn holds_stay_in_the_gauge_through_a_sweep() {
    const LABEL: &str = "oldest-many:{id}";
    on_paused_clock(|locker, snapshotter| async move {
        let mut held = Vec::new();
        for i in 0..64 {
            held.push(
                locker
                    .lock(format!("job:{i}"))
                    .label(LABEL)
                    .await
                    .expect("free"),
            );
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let shown = oldest(&snapshotter, LABEL).expect("set");
        assert!((4.0..=5.0).contains(&shown), "{shown} s after 5 s held");
        for guard in held {
            guard.release().await.expect("ours");
        }
    });
}
