//! The Locker records the series of the design guide, labelled with the backend and the
//! request's template label — never the rendered name.

mod common;

use std::time::Duration;

use common::probe_locker;
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
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let (_, locker) = probe_locker(Duration::from_millis(300));
        runtime.block_on(scenario(locker));
    });
    snapshotter.snapshot().into_vec()
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
    match value(s, metric::ACQUIRE_WAIT_SECONDS, None) {
        Some(DebugValue::Histogram(h)) => assert_eq!(h.len(), 1),
        other => panic!("wait histogram: {other:?}"),
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
    ];
    assert_eq!(
        series(metric::ACQUIRED_TOTAL, MetricKind::Counter),
        vec![(labels.clone(), &DebugValue::Counter(3))],
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
    assert!(
        matches!(&waits[..], [(l, DebugValue::Histogram(h))] if *l == labels && h.len() == 3),
        "{waits:?}"
    );
}
