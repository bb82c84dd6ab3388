//! The count-down latch ([`Locker::latch`](lock_core::Locker::latch)): it opens after its
//! last count-down and not before, a party that crashes breaks it for its waiters when its
//! lease ends, and a wait is bounded.
//!
//! Written once in lock-core over the backend's semaphores: these checks are what makes that
//! true of each store (a store that counted an expired permit, or lost a record, fails them).

use lock_core::{LockError, Locker};
use tokio::time::Instant;

use super::{Backend, name};

/// The latch `name` of `count` on `locker`, with the backend's short lease and its patience.
fn latch(backend: &Backend, locker: &Locker, name: &str, count: u32) -> lock_core::Latch {
    locker
        .latch(name, count)
        .lease(backend.short_ttl)
        .wait_at_most(backend.patience)
}

/// Three parties on lockers of their own count down one after the other: a waiter on a fourth
/// is still waiting after two (the store says 2 counted, 1 present) and returns after the
/// third; a late waiter finds it open at once.
///
/// # Panics
/// When the latch opens early, does not open, or counts wrong.
pub async fn opens_after_the_last_count_down(backend: &Backend, prefix: &str) {
    let name = name(prefix, "three");
    let waiter = {
        let latch = latch(backend, &backend.locker(), &name, 3);
        tokio::spawn(async move { latch.wait().await })
    };
    let mut parties = Vec::new();
    for _ in 0..3 {
        let party = latch(backend, &backend.locker(), &name, 3).join().await;
        parties.push(party.unwrap_or_else(|e| panic!("a place of {name}: {e}")));
    }
    let last = parties.pop().expect("three parties");
    for party in parties {
        party
            .count_down()
            .await
            .unwrap_or_else(|e| panic!("a count-down of {name}: {e}"));
    }
    tokio::time::sleep(backend.settle).await;
    let state = latch(backend, &backend.locker(), &name, 3)
        .state()
        .await
        .unwrap_or_else(|e| panic!("the state of {name}: {e}"));
    assert_eq!(
        (state.counted_down, state.parties, state.lost),
        (2, 1, 0),
        "{name} after two of three count-downs: {state:?}"
    );
    assert!(
        !waiter.is_finished(),
        "{name} opened before its last count-down"
    );
    last.count_down()
        .await
        .unwrap_or_else(|e| panic!("the last count-down of {name}: {e}"));
    let opened = tokio::time::timeout(backend.patience, waiter).await;
    let state = opened
        .unwrap_or_else(|_| panic!("{name} did not open within {:?}", backend.patience))
        .expect("the waiter ran")
        .unwrap_or_else(|e| panic!("the wait for {name}: {e}"));
    assert!(state.is_open(), "{name}: {state:?}");
    let late = latch(backend, &backend.locker(), &name, 3).wait().await;
    assert!(late.is_ok_and(|s| s.is_open()), "a late waiter of {name}");
}

/// A party that crashes (its guard leaked: no renewal, no release) while another counts down:
/// the latch is not broken while the crashed party's lease runs, and its waiter is told
/// [`LockError::Broken`] (one party lost) once the lease has ended, within the patience.
///
/// # Panics
/// When the waiter waits on, is told early, or is told something else.
pub async fn a_crashed_party_breaks_it(backend: &Backend, prefix: &str) {
    let name = name(prefix, "crashed");
    let crashed = latch(backend, &backend.locker(), &name, 2)
        .join()
        .await
        .unwrap_or_else(|e| panic!("a place of {name}: {e}"));
    let granted = Instant::now();
    let _kept = crashed.leak();
    latch(backend, &backend.locker(), &name, 2)
        .count_down()
        .await
        .unwrap_or_else(|e| panic!("a count-down of {name}: {e}"));
    let early = latch(backend, &backend.locker(), &name, 2)
        .state()
        .await
        .unwrap_or_else(|e| panic!("the state of {name}: {e}"));
    if granted.elapsed() < backend.short_ttl / 2 {
        assert_eq!(early.lost, 0, "{name} broken while the party's lease ran");
    }
    let told = latch(backend, &backend.locker(), &name, 2).wait().await;
    assert!(
        matches!(told, Err(LockError::Broken { lost: 1, .. })),
        "the waiter of {name}, whose party crashed: {told:?}"
    );
}

/// Nobody counts down: a wait bounded by the settle time ends with a timeout after it.
///
/// # Panics
/// When the wait ends otherwise or too early.
pub async fn a_wait_is_bounded(backend: &Backend, prefix: &str) {
    let name = name(prefix, "bounded");
    let started = Instant::now();
    let waited = backend
        .locker()
        .latch(name.as_str(), 1)
        .wait_at_most(backend.settle)
        .wait()
        .await;
    assert!(
        matches!(waited, Err(LockError::Timeout { .. })),
        "an unopened {name}: {waited:?}"
    );
    assert!(started.elapsed() >= backend.settle, "gave up early");
}
