//! Nodes that answer after the outcome was decided, and callers that give up: nothing is left
//! behind. In-process nodes, tokio's paused clock.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Locker, Token};
use tokio::time::{Instant, sleep, timeout};

use crate::common;
use crate::common::memory::{Behavior, MS, held, redlock, scripted, settle, since};

const TTL: Duration = Duration::from_secs(60);

fn token() -> Token {
    Token::generate().expect("rng")
}

#[tokio::test(start_paused = true)]
async fn a_late_grant_after_a_failed_acquire_is_released() {
    // Two nodes fail at once, which decides the outcome; the third grants 30 ms later.
    let fail = Behavior::Fail { retryable: true };
    let nodes = scripted(&[fail, fail, Behavior::SlowAcquire(30 * MS)]);
    let redlock = redlock(&nodes);
    let started = Instant::now();
    redlock
        .try_acquire("a", token(), TTL)
        .await
        .expect_err("no quorum");
    assert_eq!(
        since(started),
        Duration::ZERO,
        "decided without the slow node"
    );
    sleep(29 * MS).await;
    assert_eq!(
        nodes[2].calls().2,
        0,
        "not released before its attempt finished"
    );
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0], "the late grant was released");
    assert_eq!(nodes[2].calls().2, 1);
}

#[tokio::test(start_paused = true)]
async fn a_late_grant_after_a_busy_answer_is_released() {
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::Normal,
        Behavior::SlowAcquire(30 * MS),
    ]);
    for n in &nodes[..2] {
        common::memory::hold_directly(n, "a", TTL).await;
    }
    let attempt = redlock(&nodes)
        .try_acquire("a", token(), TTL)
        .await
        .expect("ok");
    assert!(matches!(attempt, Attempt::Busy { .. }), "{attempt:?}");
    settle().await;
    assert_eq!(
        held(&nodes),
        vec![1, 1, 0],
        "ours released, the holder's kept"
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_grant_after_success_is_part_of_the_lease() {
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::Normal,
        Behavior::DelayBefore(30 * MS),
    ]);
    let redlock = redlock(&nodes);
    let Attempt::Acquired(lease) = redlock.try_acquire("a", token(), TTL).await.expect("ok") else {
        panic!("granted")
    };
    settle().await;
    assert_eq!(
        held(&nodes),
        vec![1, 1, 1],
        "the late grant is kept while the lease is held"
    );
    assert!(redlock.release(&lease).await.expect("ok"));
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_release_before_a_late_grant_waits_for_it_and_releases_it_once() {
    // The lease is granted by two nodes and released at once; the third node's grant lands
    // 30 ms later. Its release waits for that grant, then removes it: one release per node,
    // and the release returns once all three have finished.
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::Normal,
        Behavior::SlowAcquire(30 * MS),
    ]);
    let redlock = redlock(&nodes);
    let Attempt::Acquired(lease) = redlock.try_acquire("a", token(), TTL).await.expect("ok") else {
        panic!("granted")
    };
    let started = Instant::now();
    assert!(
        redlock.release(&lease).await.expect("ok"),
        "a quorum released"
    );
    assert_eq!(
        since(started),
        30 * MS,
        "returned once the slow node's grant had landed and been released"
    );
    assert_eq!(held(&nodes), vec![0, 0, 0], "the late grant was released");
    assert!(
        nodes.iter().all(|n| n.calls().2 == 1),
        "exactly one release per node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_acquire_and_release_are_always_ours() {
    // Two nodes of five answer late: every lease is granted with acquires still in flight
    // and released at once, racing them. The release must still see a quorum of our keys.
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::Normal,
        Behavior::Normal,
        Behavior::SlowAcquire(MS),
        Behavior::DelayAfter(MS),
    ]);
    let redlock = redlock(&nodes);
    for round in 0..300 {
        let Attempt::Acquired(lease) = redlock.try_acquire("a", token(), TTL).await.expect("ok")
        else {
            panic!("round {round}: granted")
        };
        assert!(
            redlock.release(&lease).await.expect("ok"),
            "round {round}: our own fresh lease"
        );
    }
    // The slow nodes take each lease's acquire and release in turn (an acquire waits for the
    // previous release there), so they lag behind the quorum: wait for them (at most 5 s).
    for _ in 0..500 {
        if nodes.iter().all(|n| n.calls().2 == 300) {
            break;
        }
        sleep(Duration::from_millis(10)).await;
    }
    eprintln!(
        "acquires sent: {:?}",
        nodes.iter().map(|n| n.calls().0).collect::<Vec<_>>()
    );
    assert_eq!(held(&nodes), vec![0; 5]);
    assert!(
        nodes.iter().all(|n| n.calls().2 == 300),
        "one release per node per lease: {:?}",
        nodes.iter().map(|n| n.calls().2).collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_acquire_leaves_nothing_behind() {
    // Replies come 30 ms after the nodes applied the acquire; the caller gives up at 10 ms.
    let nodes = scripted(&[Behavior::DelayAfter(30 * MS); 3]);
    let redlock = redlock(&nodes);
    let gave_up = timeout(10 * MS, redlock.try_acquire("a", token(), TTL)).await;
    assert!(gave_up.is_err(), "cancelled");
    assert_eq!(held(&nodes), vec![1, 1, 1], "applied, not answered yet");
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_locker_acquire_leaves_nothing_behind() {
    let nodes = scripted(&[Behavior::SlowAcquire(30 * MS); 5]);
    let locker = Locker::new(redlock(&nodes));
    let gave_up = timeout(10 * MS, locker.lock("a").fixed_ttl(TTL).acquire()).await;
    assert!(gave_up.is_err(), "cancelled");
    settle().await;
    assert_eq!(held(&nodes), vec![0; 5]);
}

#[tokio::test(start_paused = true)]
async fn a_hung_minority_delays_only_the_first_release_by_the_release_timeout() {
    let hung = Behavior::DelayBefore(Duration::from_secs(3600));
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::Normal,
        Behavior::Normal,
        hung,
        hung,
    ]);
    let locker = Locker::new(redlock(&nodes));
    for cycle in 0..10 {
        let started = Instant::now();
        let guard = locker.lock("a").fixed_ttl(TTL).await.expect("granted");
        assert_eq!(since(started), Duration::ZERO, "granted at the quorum");
        let started = Instant::now();
        guard.release().await.expect("ok");
        let expected = if cycle == 0 {
            // Waited for the hung nodes until its timeout, and no longer.
            lock_redlock::NODE_TIMEOUT_CEILING
        } else {
            // They are lagging now: not waited for.
            Duration::ZERO
        };
        assert_eq!(since(started), expected, "cycle {cycle}");
    }
    settle().await;
    assert_eq!(held(&nodes), vec![0; 5]);
}
