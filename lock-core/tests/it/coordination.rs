//! Latches and barriers over the in-memory store: they open when their parties are done or
//! in, a party that crashes (its guard leaked: no renewal, no release) breaks a latch and is
//! counted out of a barrier when its lease ends, and bad input is refused before any I/O.
//! Tokio's paused clock makes every instant exact.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lock_core::backend::Capabilities;
use lock_core::{LockError, Locker, MemoryLock};
use tokio::time::{Instant, sleep};

use crate::common::Declaring;

const LEASE: Duration = Duration::from_secs(3);

/// `n` lockers over one store: the processes of a test.
fn lockers(n: usize) -> Vec<Locker> {
    let store = Arc::new(MemoryLock::new());
    (0..n).map(|_| Locker::new(Arc::clone(&store))).collect()
}

#[tokio::test(start_paused = true)]
async fn latch_opens_after_the_last_count_down() {
    let all = lockers(4);
    let latch = |i: usize| all[i].latch("loaded", 3).lease(LEASE);
    let waiter = tokio::spawn({
        let it = latch(0).wait_at_most(Duration::from_secs(60));
        async move { it.wait().await }
    });
    let parties = [
        latch(1).join().await.expect("a place"),
        latch(2).join().await.expect("a place"),
        latch(3).join().await.expect("a place"),
    ];
    let mut parties = parties.into_iter();
    for counted in 1..=2 {
        parties
            .next()
            .expect("a party")
            .count_down()
            .await
            .expect("counted down");
        sleep(Duration::from_secs(1)).await;
        let state = latch(0).state().await.expect("read");
        assert_eq!((state.counted_down, state.parties), (counted, 3 - counted));
        assert!(
            !state.is_open() && !waiter.is_finished(),
            "open after {counted}"
        );
    }
    let last = Instant::now();
    parties
        .next()
        .expect("a party")
        .count_down()
        .await
        .expect("counted down");
    let state = waiter.await.expect("the task ran").expect("open");
    assert!(state.is_open() && state.lost == 0, "{state:?}");
    assert!(
        last.elapsed() <= Duration::from_millis(200),
        "seen within a poll"
    );
    // Late waiters see it open; a count-down after it opened changes nothing.
    latch(1)
        .count_down()
        .await
        .expect_err("every party has joined");
    assert!(latch(2).wait().await.expect("open").is_open());
}

#[tokio::test(start_paused = true)]
async fn a_crashed_party_breaks_the_latch_when_its_lease_ends() {
    let all = lockers(3);
    let latch = |i: usize| all[i].latch("shards", 2).lease(LEASE);
    let crashed = latch(1).join().await.expect("a place");
    let crashed_at = Instant::now();
    let _kept = crashed.leak();
    latch(2).count_down().await.expect("counted down");
    let broken = latch(0).wait_at_most(Duration::from_secs(60)).wait().await;
    assert!(
        matches!(broken, Err(LockError::Broken { ref name, lost: 1 }) if name == "shards"),
        "{broken:?}"
    );
    let told = crashed_at.elapsed();
    assert!(
        told >= LEASE && told <= LEASE + Duration::from_millis(250),
        "told {told:?} after the crash, the lease is {LEASE:?}"
    );
    let state = latch(0).state().await.expect("read");
    assert!(state.is_broken() && !state.is_open(), "{state:?}");
}

#[tokio::test(start_paused = true)]
async fn a_party_dropped_before_its_count_down_breaks_it_at_once() {
    let all = lockers(2);
    let party = all[1].latch("job", 2).join().await.expect("a place");
    drop(party);
    sleep(Duration::from_millis(50)).await;
    let broken = all[0].latch("job", 2).wait().await;
    assert!(
        matches!(broken, Err(LockError::Broken { lost: 1, .. })),
        "{broken:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_latch_wait_is_bounded_and_its_places_are_count() {
    let all = lockers(3);
    let latch = |i: usize| {
        all[i]
            .latch("two", 1)
            .lease(LEASE)
            .wait_at_most(Duration::from_secs(2))
    };
    let party = latch(1).join().await.expect("a place");
    let started = Instant::now();
    let waited = latch(0).wait().await;
    assert!(
        matches!(waited, Err(LockError::Timeout { .. })),
        "{waited:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    // The one place is taken: another party waits for it, and gives up at the bound.
    let second = latch(2).join().await;
    assert!(
        matches!(second, Err(LockError::Timeout { .. })),
        "{second:?}"
    );
    party.count_down().await.expect("counted down");
    assert!(latch(0).wait().await.expect("open").is_open());
}

/// A latch's wait without a bound of its own takes its Locker's default wait.
#[tokio::test(start_paused = true)]
async fn a_latch_wait_without_a_bound_takes_the_lockers_default() {
    let locker = Locker::builder(Arc::new(MemoryLock::new()))
        .wait(Duration::from_secs(4))
        .build();
    let started = Instant::now();
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        locker.latch("never", 2).lease(LEASE).wait(),
    )
    .await
    .expect("bounded by the locker's default wait");
    assert!(
        matches!(waited, Err(LockError::Timeout { .. })),
        "{waited:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(4));
}

#[tokio::test(start_paused = true)]
async fn a_lost_party_cannot_count_down() {
    let all = lockers(1);
    let latch = all[0].latch("lost", 1).lease(LEASE);
    let party = latch.join().await.expect("a place");
    all[0]
        .backend_lock()
        .release(&party.guard().lease())
        .await
        .expect("released");
    tokio::time::timeout(Duration::from_secs(10), party.lost())
        .await
        .expect("the loss is noticed at the next renewal");
    let counted = party.count_down().await;
    assert!(
        matches!(counted, Err(LockError::Lost { .. })),
        "{counted:?}"
    );
    assert!(latch.state().await.expect("read").is_broken());
}

#[tokio::test(start_paused = true)]
async fn barrier_members_enter_together_and_leave_together() {
    let all = lockers(3);
    let barrier = |i: usize| all[i].barrier("reindex", 3).lease(LEASE);
    let first = tokio::spawn({
        let it = barrier(0);
        async move { it.enter().await }
    });
    let second = tokio::spawn({
        let it = barrier(1);
        async move { it.enter().await }
    });
    sleep(Duration::from_secs(1)).await;
    assert!(
        !first.is_finished() && !second.is_finished(),
        "in before the third"
    );
    let state = barrier(2).state().await.expect("read");
    assert_eq!(
        (state.present, state.passed, state.is_open()),
        (2, 0, false)
    );
    let third = barrier(2).enter().await.expect("entered");
    let (first, second) = (
        first.await.expect("the task ran").expect("entered"),
        second.await.expect("the task ran").expect("entered"),
    );
    // Those who leave first wait for the last.
    let leaving = [tokio::spawn(first.leave()), tokio::spawn(second.leave())];
    sleep(Duration::from_secs(1)).await;
    assert!(
        leaving.iter().all(|l| !l.is_finished()),
        "left before the third"
    );
    let last = Instant::now();
    third.leave().await.expect("left");
    for leave in leaving {
        leave.await.expect("the task ran").expect("left");
    }
    assert!(
        last.elapsed() <= Duration::from_millis(200),
        "seen within a poll"
    );
    let state = barrier(0).state().await.expect("read");
    assert_eq!(
        (state.present, state.passed),
        (0, 0),
        "the next round starts empty"
    );
}

#[tokio::test(start_paused = true)]
async fn a_crashed_member_is_counted_out_of_the_leave() {
    let all = lockers(2);
    let barrier = |i: usize| all[i].barrier("pair", 2).lease(LEASE);
    let other = tokio::spawn({
        let it = barrier(1);
        async move { it.enter().await }
    });
    let member = barrier(0).enter().await.expect("entered");
    let crashed = other.await.expect("the task ran").expect("entered");
    let crashed_at = Instant::now();
    let _kept = crashed.leak();
    member
        .leave()
        .await
        .expect("the crashed member is counted out");
    let waited = crashed_at.elapsed();
    assert!(
        waited >= LEASE && waited <= LEASE + Duration::from_millis(250),
        "left {waited:?} after the crash, the lease is {LEASE:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_place_given_up_is_taken_by_another_member() {
    let all = lockers(3);
    let barrier = |i: usize| {
        all[i]
            .barrier("gate", 2)
            .lease(LEASE)
            .wait_at_most(Duration::from_secs(2))
    };
    let gave_up = barrier(0).enter().await;
    assert!(
        matches!(gave_up, Err(LockError::Timeout { .. })),
        "{gave_up:?}"
    );
    assert_eq!(
        barrier(0).state().await.expect("read").present,
        0,
        "its place is free"
    );
    let late = tokio::spawn({
        let it = barrier(1);
        async move { it.enter().await }
    });
    let member = barrier(2).enter().await.expect("entered");
    let late = late.await.expect("the task ran").expect("entered");
    drop((member, late));
}

#[tokio::test(start_paused = true)]
async fn bad_input_and_missing_semaphores_send_nothing() {
    let all = lockers(1);
    let locker = &all[0];
    let zero = locker.latch("z", 0).join().await;
    assert!(
        matches!(zero, Err(LockError::InvalidInput { .. })),
        "{zero:?}"
    );
    let empty = locker.barrier("", 2).enter().await;
    assert!(
        matches!(empty, Err(LockError::InvalidInput { .. })),
        "{empty:?}"
    );
    let long = "n".repeat(lock_core::MAX_NAME_LEN - 5);
    let long = locker.latch(long, 2).wait().await;
    assert!(
        matches!(long, Err(LockError::InvalidInput { .. })),
        "no room for the suffix"
    );
    let keep = locker.latch("k", 1).keep(Duration::ZERO).count_down().await;
    assert!(
        matches!(keep, Err(LockError::InvalidInput { .. })),
        "{keep:?}"
    );
    let store = Arc::new(Declaring::new("plain", Capabilities::MUTEX));
    let plain = Locker::new(Arc::clone(&store));
    let latch = plain.latch("l", 1).join().await;
    assert!(
        matches!(latch, Err(LockError::Unsupported { kind: "latch", .. })),
        "{latch:?}"
    );
    let barrier = plain.barrier("b", 1).state().await;
    assert!(
        matches!(
            barrier,
            Err(LockError::Unsupported {
                kind: "barrier",
                ..
            })
        ),
        "{barrier:?}"
    );
    assert_eq!(store.attempts.load(Ordering::SeqCst), 0, "nothing sent");
}
