//! Building a Redlock: what is refused, and the derived settings.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{LockError, MemoryLock};
use lock_redlock::{
    NODE_TIMEOUT_CEILING, NODE_TIMEOUT_FLOOR, Redlock, default_node_timeout, quorum,
};

fn invalid(result: Result<Redlock, LockError>) -> String {
    match result {
        Err(LockError::InvalidInput { reason }) => reason,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn refuses_bad_configurations() {
    assert!(invalid(Redlock::builder().build()).contains("at least one node"));

    let shared: Arc<dyn Lock> = Arc::new(MemoryLock::new());
    let twice = Redlock::builder()
        .node_arc(Arc::clone(&shared))
        .node_arc(shared)
        .build();
    assert!(invalid(twice).contains("independent"));

    let same_label = Redlock::builder()
        .named_node("a", MemoryLock::new())
        .named_node("a", MemoryLock::new())
        .build();
    assert!(invalid(same_label).contains("\"a\""));

    let zero = Redlock::builder()
        .node(MemoryLock::new())
        .node_timeout(Duration::ZERO)
        .build();
    assert!(invalid(zero).contains("node timeout"));

    for factor in [f64::NAN, f64::INFINITY, -0.01, 1.0, 2.0] {
        let bad = Redlock::builder()
            .node(MemoryLock::new())
            .drift_factor(factor)
            .build();
        assert!(invalid(bad).contains("drift factor"), "{factor}");
    }
    let bad = Redlock::builder()
        .node(MemoryLock::new())
        .drift_constant(Duration::MAX)
        .build();
    assert!(invalid(bad).contains("drift constant"));
}

#[test]
fn derived_settings() {
    let redlock = Redlock::builder()
        .nodes((0..5).map(|_| MemoryLock::new()))
        .build()
        .expect("valid");
    assert_eq!((redlock.node_count(), redlock.quorum()), (5, 3));
    assert_eq!(quorum(5), 3);
    let labels: Vec<_> = redlock.nodes().map(|(label, _)| label.to_owned()).collect();
    assert_eq!(labels, ["0", "1", "2", "3", "4"]);
    assert_eq!(redlock.backend(), "redlock");

    let s = Duration::from_secs;
    assert_eq!(redlock.drift(s(10)), Duration::from_millis(102));
    assert_eq!(redlock.node_timeout(s(10)), Duration::from_millis(200));
    assert_eq!(redlock.node_timeout(s(1)), NODE_TIMEOUT_FLOOR);
    assert_eq!(redlock.node_timeout(s(86_400)), NODE_TIMEOUT_CEILING);
    // Never past the point where the lease could still be valid.
    let short = Duration::from_millis(10);
    assert_eq!(redlock.node_timeout(short), short - redlock.drift(short));
    assert_eq!(default_node_timeout(s(20)), Duration::from_millis(400));
    assert_eq!(default_node_timeout(s(30)), NODE_TIMEOUT_CEILING);

    let fixed = Redlock::builder()
        .node(MemoryLock::new())
        .node_timeout(Duration::from_millis(20))
        .drift_factor(0.0)
        .drift_constant(Duration::ZERO)
        .build()
        .expect("valid");
    assert_eq!(fixed.node_timeout(s(10)), Duration::from_millis(20));
    assert_eq!(fixed.drift(s(10)), Duration::ZERO);
    assert!(format!("{fixed:?}").contains("0: memory"));
}
