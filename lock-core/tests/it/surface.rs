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
