//! The Locker records the series of the design guide, labelled with the backend and the
//! request's template label — never the rendered name.

use std::time::Duration;

use crate::common::{probe_locker, recorded_while};
use lock_core::{Locker, metric};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};

/// One snapshot (taking it drains histograms), searched by name and labels.
type Snapshot = Vec<(
    CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

fn value<'s>(
    snapshot: &'s Snapshot,
    name: &str,
    extra: Option<(&str, &str)>,
) -> Option<&'s DebugValue> {
    snapshot.iter().find_map(|(key, _, _, v)| {
        let key = key.key();
        let labels: Vec<_> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let wanted = key.name() == name
            && labels.contains(&("backend".into(), "probe".into()))
            && labels.contains(&("lock".into(), "job:{id}".into()))
            && extra.is_none_or(|(k, v)| labels.contains(&(k.into(), v.into())));
        wanted.then_some(v)
    })
}

fn counter(s: &Snapshot, name: &str, extra: Option<(&str, &str)>) -> u64 {
    match value(s, name, extra) {
        Some(DebugValue::Counter(n)) => *n,
        None => 0,
        other => panic!("{name} is not a counter: {other:?}"),
    }
}

/// Runs `scenario` on a locker over the test backend (300 ms leases, paused clock) with a
/// recorder of its own, and returns what it recorded.
fn recorded<F: Future<Output = ()>>(scenario: impl FnOnce(Locker) -> F) -> Snapshot {
    recorded_while(async {
        let (_, locker) = probe_locker(Duration::from_millis(300));
        scenario(locker).await;
    })
}

#[test]
fn a_scripted_scenario_records_the_expected_series() {
    let snapshot = recorded(|locker| async move {
        let guard = locker.lock("job:42").label("job:{id}").await.expect("free");
        assert!(
            locker
                .lock("job:42")
                .label("job:{id}")
                .try_acquire()
                .await
                .expect("ok")
                .is_none()
        );
        let timed_out = locker
            .lock("job:42")
            .label("job:{id}")
            .wait(Duration::from_millis(50))
            .await;
        assert!(timed_out.is_err());
        tokio::time::sleep(Duration::from_millis(250)).await; // two renewals
        guard.release().await.expect("ok");
        let _ = locker.lock("").label("job:{id}").await; // invalid
    });
    let s = &snapshot;
    assert_eq!(counter(s, metric::ACQUIRED_TOTAL, None), 1);
    assert!(
        counter(s, metric::ACQUIRE_ATTEMPTS_TOTAL, None) >= 3,
        "the grant, the try and the waiter's tries"
    );
    assert_eq!(
        counter(s, metric::NOT_ACQUIRED_TOTAL, Some(("reason", "busy"))),
        1
    );
    assert_eq!(
        counter(s, metric::NOT_ACQUIRED_TOTAL, Some(("reason", "timeout"))),
        1
    );
    assert_eq!(
        counter(s, metric::NOT_ACQUIRED_TOTAL, Some(("reason", "invalid"))),
        1
    );
    assert_eq!(
        counter(s, metric::RENEWALS_TOTAL, Some(("outcome", "ok"))),
        2
    );
    assert_eq!(counter(s, metric::RELEASE_NOT_OWNED_TOTAL, None), 0);
    assert_eq!(counter(s, metric::LOST_TOTAL, None), 0);
    match value(s, metric::HELD, None) {
        Some(DebugValue::Gauge(g)) => assert_eq!(g.into_inner(), 0.0, "nothing held at the end"),
        other => panic!("held gauge: {other:?}"),
    }
    match value(s, metric::WAITERS, None) {
        Some(DebugValue::Gauge(g)) => assert_eq!(g.into_inner(), 0.0, "nobody waiting at the end"),
        other => panic!("waiters gauge: {other:?}"),
    }
    match value(s, metric::HELD_SECONDS, None) {
        Some(DebugValue::Histogram(h)) => {
            assert_eq!(h.len(), 1);
            assert_eq!(
                h[0].into_inner(),
                0.3,
                "held 300 ms on the paused clock (250 ms + the 50 ms wait)"
            );
        }
        other => panic!("held histogram: {other:?}"),
    }
    // The grant (the try's round trip is one too), and the wait that timed out, under its
    // outcome, with how long it waited.
    match value(
        s,
        metric::ACQUIRE_WAIT_SECONDS,
        Some(("outcome", "acquired")),
    ) {
        Some(DebugValue::Histogram(h)) => assert_eq!(h.len(), 1),
        other => panic!("wait histogram: {other:?}"),
    }
    match value(
        s,
        metric::ACQUIRE_WAIT_SECONDS,
        Some(("outcome", "timeout")),
    ) {
        Some(DebugValue::Histogram(h)) => {
            assert_eq!(h.len(), 1);
            assert!(h[0].into_inner() >= 0.05, "waited its 50 ms: {h:?}");
        }
        other => panic!("wait histogram of the timeout: {other:?}"),
    }
    // Cardinality: the rendered name never appears as a label value.
    for (key, ..) in &snapshot {
        let _: MetricKind = key.kind();
        assert!(
            key.key().labels().all(|l| l.value() != "job:42"),
            "rendered name leaked into {key:?}"
        );
        assert!(key.key().name().starts_with("distlock_"));
    }
}

#[test]
fn requests_without_a_label_are_recorded_as_unlabelled() {
    let snapshot = recorded(|locker| async move {
        for _ in 0..3 {
            let guard = locker.lock("job:7").await.expect("free");
            guard.release().await.expect("release");
        }
    });
    let series = |name: &str, kind: MetricKind| {
        snapshot
            .iter()
            .filter(|(key, ..)| key.kind() == kind && key.key().name() == name)
            .map(|(key, _, _, value)| {
                let labels: Vec<(String, String)> = key
                    .key()
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                (labels, value)
            })
            .collect::<Vec<_>>()
    };
    let labels = vec![
        ("backend".to_owned(), "probe".to_owned()),
        ("lock".to_owned(), "unlabelled".to_owned()),
        ("kind".to_owned(), "mutex".to_owned()),
    ];
    let mut via_attempt = labels.clone();
    via_attempt.push(("via".to_owned(), "attempt".to_owned()));
    assert_eq!(
        series(metric::ACQUIRED_TOTAL, MetricKind::Counter),
        vec![(via_attempt, &DebugValue::Counter(3))],
        "one series, never the rendered name"
    );
    let held = series(metric::HELD, MetricKind::Gauge);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].0, labels);
    assert!(
        matches!(held[0].1, DebugValue::Gauge(g) if g.into_inner() == 0.0),
        "every grant was released: {:?}",
        held[0].1
    );
    let waits = series(metric::ACQUIRE_WAIT_SECONDS, MetricKind::Histogram);
    let mut acquired = labels.clone();
    acquired.push(("outcome".to_owned(), "acquired".to_owned()));
    assert!(
        matches!(&waits[..], [(l, DebugValue::Histogram(h))] if *l == acquired && h.len() == 3),
        "{waits:?}"
    );
}

/// Grants are counted by how they came: an attempt sent to the backend, a handover from a guard
/// of this process (no attempt), a nested re-entry (no attempt, no new lease).
#[test]
fn grants_are_counted_by_how_they_came() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let (probe, locker) = probe_locker(Duration::from_millis(300));
        probe
            .hands_over
            .store(true, std::sync::atomic::Ordering::SeqCst);
        runtime.block_on(async {
            let request = || locker.lock("job:1").label("job:{id}");
            // Inside a task, so that the nested request re-enters.
            let first = tokio::spawn({
                let request = request();
                let locker = locker.clone();
                async move {
                    let guard = request.await.expect("free");
                    let nested = locker
                        .lock("job:1")
                        .label("job:{id}")
                        .await
                        .expect("nested");
                    assert!(nested.is_nested());
                    drop(nested);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    guard.release().await.expect("release");
                }
            });
            tokio::time::sleep(Duration::from_millis(10)).await;
            // Waits behind the holder, and is handed the lock when it is released.
            let second = request()
                .wait(Duration::from_secs(1))
                .await
                .expect("handed over");
            first.await.expect("first task");
            second.release().await.expect("release");
        });
    });
    let s = &snapshotter.snapshot().into_vec();
    assert_eq!(
        counter(s, metric::ACQUIRED_TOTAL, Some(("via", "attempt"))),
        1
    );
    assert_eq!(
        counter(s, metric::ACQUIRED_TOTAL, Some(("via", "handover"))),
        1
    );
    assert_eq!(
        counter(s, metric::ACQUIRED_TOTAL, Some(("via", "reentry"))),
        1
    );
    assert!(
        counter(s, metric::ACQUIRE_ATTEMPTS_TOTAL, None) >= 2,
        "the holder's attempt and at least one busy try of the waiter"
    );
    match value(s, metric::ACQUIRE_WAIT_SECONDS, None) {
        Some(DebugValue::Histogram(h)) => assert_eq!(h.len(), 2, "a wait per lease granted"),
        other => panic!("wait histogram: {other:?}"),
    }
}

/// `describe` gives every series a unit and a description (Prometheus' `# HELP`), and
/// building a Locker describes them.
#[test]
fn building_a_locker_describes_every_series() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let _ = probe_locker(Duration::from_millis(300));
        // Described series show up in a snapshot once they are registered.
        for name in ALL {
            metrics::with_recorder(|r| {
                let key = metrics::Key::from_static_name(name);
                let meta = metrics::Metadata::new("t", metrics::Level::INFO, None);
                drop(r.register_counter(&key, &meta));
                drop(r.register_gauge(&key, &meta));
                drop(r.register_histogram(&key, &meta));
            });
        }
    });
    let snapshot = snapshotter.snapshot().into_vec();
    for name in ALL {
        let described = snapshot
            .iter()
            .filter(|(key, ..)| key.key().name() == name)
            .any(|(_, unit, help, _)| {
                unit.is_some() && help.as_ref().is_some_and(|h| !h.is_empty())
            });
        assert!(described, "{name} has no unit or description");
    }
}

const ALL: [&str; 12] = [
    metric::ACQUIRE_ATTEMPTS_TOTAL,
    metric::ACQUIRED_TOTAL,
    metric::NOT_ACQUIRED_TOTAL,
    metric::ACQUIRE_WAIT_SECONDS,
    metric::HELD_SECONDS,
    metric::HELD,
    metric::OLDEST_HELD_SECONDS,
    metric::WAITERS,
    metric::RENEWALS_TOTAL,
    metric::LOST_TOTAL,
    metric::RELEASE_NOT_OWNED_TOTAL,
    metric::BACKEND_ERRORS_TOTAL,
];

#[test]
fn every_series_carries_the_kind_and_permits_are_gauged() {
    let snapshot = recorded(|locker| async move {
        let read = locker.read("doc").label("job:{id}").await.expect("free");
        let permits = locker
            .semaphore("pool", 8)
            .permits(3)
            .label("job:{id}")
            .await
            .expect("free");
        read.release().await.expect("ours");
        // Still held when the snapshot is taken (forgotten: neither released nor counted off).
        std::mem::forget(permits);
    });
    let acquired = |kind| counter(&snapshot, metric::ACQUIRED_TOTAL, Some(("kind", kind)));
    assert_eq!((acquired("read"), acquired("semaphore")), (1, 1));
    assert_eq!(acquired("mutex"), 0);
    match value(&snapshot, metric::PERMITS_HELD, Some(("kind", "semaphore"))) {
        Some(DebugValue::Gauge(held)) => assert_eq!(held.into_inner(), 3.0, "three permits held"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_dropped_wait_is_recorded_as_cancelled() {
    let snapshot = recorded(|locker| async move {
        let _guard = locker.lock("job:7").label("job:{id}").await.expect("free");
        let wait = locker
            .lock("job:7")
            .label("job:{id}")
            .wait(Duration::from_secs(60))
            .acquire();
        // The caller gives up after 100 ms: the wait is dropped.
        let gave_up = tokio::time::timeout(Duration::from_millis(100), wait).await;
        assert!(gave_up.is_err());
    });
    match value(
        &snapshot,
        metric::ACQUIRE_WAIT_SECONDS,
        Some(("outcome", "cancelled")),
    ) {
        Some(DebugValue::Histogram(h)) => {
            assert_eq!(h.len(), 1);
            assert!(
                (h[0].into_inner() - 0.1).abs() < 1e-3,
                "waited 100 ms: {h:?}"
            );
        }
        other => panic!("wait histogram of the dropped wait: {other:?}"),
    }
}
