//! The Locker's small promises that no larger test reads back, each found missing by
//! `cargo mutants` over lock-core's policy (VERIFICATION.md §4.2): a mutant that answers a
//! constant instead of asking the store must fail here.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lock_core::{LockError, Locker};

use crate::common::Probe;

/// `Locker::ping` asks the backend: a store that is down is an error, not a silent `Ok`.
#[tokio::test]
async fn ping_says_what_the_store_says() {
    let probe = Arc::new(Probe::default());
    let locker = Locker::new(Arc::clone(&probe));
    locker.ping().await.expect("the store answers");
    probe.failing.store(true, Ordering::SeqCst);
    let down = locker.ping().await;
    assert!(
        matches!(
            down,
            Err(LockError::Backend {
                retryable: true,
                ..
            })
        ),
        "a store that is down answered {down:?}"
    );
}

/// An election's `Debug` (in a service's logs) names what it elects for and its options.
#[tokio::test]
async fn an_elections_debug_names_it() {
    let locker = Locker::new(Arc::new(Probe::default()));
    let election = locker
        .elect("scheduler")
        .value("node-7")
        .lock_delay(std::time::Duration::from_secs(3));
    let shown = format!("{election:?}");
    for part in [
        "Election",
        "\"scheduler\"",
        "node-7",
        "lock_delay: 3s",
        "probe",
    ] {
        assert!(shown.contains(part), "{part:?} missing from {shown}");
    }
}

/// What a service's logs show of each handle (`{:?}`): its type and what it is for — the
/// backend, the name, the options it was given.
#[tokio::test(start_paused = true)]
async fn every_handle_says_what_it_is_in_debug() {
    use std::time::Duration;

    let builder = Locker::builder(Arc::new(Probe::default()))
        .lease(Duration::from_secs(7))
        .stop_margin(Duration::from_millis(700));
    let shown = |what: &dyn std::fmt::Debug, parts: &[&str]| {
        let text = format!("{what:?}");
        for part in parts {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
    };
    shown(
        &builder,
        &[
            "LockerBuilder",
            "probe",
            "lease: 7s",
            "stop_margin: Some(700ms)",
        ],
    );
    let locker = builder.build();
    shown(&locker, &["Locker", "probe", "lease: 7s"]);
    shown(
        &locker.lock("orders").max_hold(Duration::from_secs(9)),
        &["LockRequest", "\"orders\"", "Mutex", "max_hold: Some(9s)"],
    );
    shown(
        &locker.lock_all(["a", "b"]),
        &[
            "MultiRequest",
            "\"a\"",
            "\"b\"",
            "Options",
            "stop_on: false",
        ],
    );
    shown(
        &locker.lock_all(["a"]).stop_on(std::future::pending()),
        &["stop_on: true"],
    );
    shown(&locker.lock("orders"), &["stop_on: false"]);
    shown(
        &locker.lock("orders").stop_on(std::future::pending()),
        &["stop_on: true"],
    );
    let all = locker.lock_all(["a", "b"]).await.expect("free");
    shown(&all, &["\"a\"", "\"b\""]);
    all.release().await.expect("ours");
    let kept = locker.lock("kept").await.expect("free").leak();
    shown(
        &locker.adopt(kept.clone()),
        &["AdoptRequest", "\"kept\"", "fencing_token"],
    );
    let leadership = locker
        .elect("scheduler")
        .value("pod-a")
        .campaign()
        .await
        .expect("elected");
    shown(
        &leadership,
        &["Leadership", "\"scheduler\"", "pod-a", "leading: true"],
    );
}

/// A multi-lock request says which names it takes, in the order it will take them.
#[tokio::test]
async fn a_multi_request_names_its_names_in_order() {
    let locker = Locker::new(Arc::new(Probe::default()));
    let request = locker.lock_all(["b", "a", "c"]);
    let names: Vec<&str> = request.names().iter().map(|n| &**n).collect();
    assert_eq!(names, ["a", "b", "c"]);
}

/// A multi-lock's guard splits into one guard per name, sorted by name.
#[tokio::test]
async fn a_multi_guard_splits_into_its_guards() {
    let locker = Locker::new(Arc::new(Probe::default()));
    let all = locker.lock_all(["b", "a"]).await.expect("free");
    let guards = all.into_guards();
    let names: Vec<&str> = guards.iter().map(|g| g.name()).collect();
    assert_eq!(names, ["a", "b"]);
    for guard in guards {
        guard.release().await.expect("ours");
    }
}
