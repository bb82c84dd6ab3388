//! Extend and release need a quorum of all N nodes. In-process nodes, tokio's paused clock.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, Locker, Op, Token};
use tokio::time::{Instant, sleep};

use crate::common::memory::{Behavior, MS, held, nodes, quorum_error, redlock, settle, since};

const TTL: Duration = Duration::from_secs(60);

async fn acquire(redlock: &lock_redlock::Redlock) -> lock_core::Lease {
    match redlock
        .try_acquire("a", Token::generate().expect("rng"), TTL)
        .await
        .expect("ok")
    {
        Attempt::Acquired(lease) => lease,
        busy => panic!("expected a grant, got {busy:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn extend_succeeds_with_a_minority_gone_and_fails_without_a_quorum() {
    let nodes = nodes(5);
    let redlock = redlock(&nodes);
    let lease = acquire(&redlock).await;
    settle().await;

    // Two of five down: still a quorum.
    nodes[3].set(Behavior::Fail { retryable: true });
    nodes[4].set(Behavior::Fail { retryable: true });
    let started = Instant::now();
    let extended = redlock
        .extend(&lease, 2 * TTL)
        .await
        .expect("ok")
        .expect("still ours");
    assert_eq!(extended, started + 2 * TTL - redlock.drift(2 * TTL));

    // Three down: no quorum, a retryable error (not "not ours": we cannot tell).
    nodes[2].set(Behavior::Fail { retryable: true });
    let error = redlock.extend(&lease, TTL).await.expect_err("no quorum");
    assert!(error.is_retryable());
    let q = quorum_error(&error).expect("QuorumNotReached");
    assert_eq!((q.op, q.required, q.failed), (Op::Extend, 3, 3));
    assert!(q.granted <= 2);
}

#[tokio::test(start_paused = true)]
async fn extend_of_an_expired_lease_is_not_owned() {
    let nodes = nodes(3);
    let locker = Locker::new(redlock(&nodes));
    let mut guard = locker
        .lock("a")
        .fixed_ttl(Duration::from_secs(1))
        .await
        .expect("ok");
    sleep(Duration::from_secs(2)).await;
    let error = guard.extend(TTL).await.expect_err("expired everywhere");
    assert!(matches!(error, LockError::NotOwned { .. }), "{error:?}");
    // Someone else took it meanwhile: extend leaves them alone.
    let other = locker.lock("a").fixed_ttl(TTL).await.expect("free");
    assert!(matches!(
        guard.extend(TTL).await,
        Err(LockError::NotOwned { .. })
    ));
    assert!(
        matches!(guard.release().await, Err(LockError::NotOwned { .. })),
        "no longer ours"
    );
    other.release().await.expect("ok");
}

#[tokio::test(start_paused = true)]
async fn extend_only_counts_nodes_that_still_hold_the_token() {
    // Granted on three of five (two were down); then one of the three is lost. The two nodes
    // that came back never had the key: extend does not create it there.
    let nodes = nodes(5);
    nodes[3].set(Behavior::Fail { retryable: true });
    nodes[4].set(Behavior::Fail { retryable: true });
    let redlock = redlock(&nodes);
    let lease = acquire(&redlock).await;
    settle().await;
    nodes[3].set(Behavior::Normal);
    nodes[4].set(Behavior::Normal);
    nodes[2].set(Behavior::Fail { retryable: true });
    assert!(
        lease.remaining() > Duration::ZERO,
        "the lease is still valid"
    );
    let error = redlock.extend(&lease, TTL).await.expect_err("2 of 5");
    let q = quorum_error(&error).expect("QuorumNotReached");
    assert!(q.granted <= 2 && q.failed == 1, "{q}");
    assert_eq!(q.granted + q.refused + q.failed + q.unanswered, 5);
}

#[tokio::test(start_paused = true)]
async fn release_is_true_iff_a_quorum_released() {
    let nodes = nodes(5);
    let redlock = redlock(&nodes);

    let lease = acquire(&redlock).await;
    settle().await;
    nodes[0].set(Behavior::Fail { retryable: true });
    nodes[1].set(Behavior::Fail { retryable: true });
    assert!(redlock.release(&lease).await.expect("3 of 5 released"));
    settle().await;
    assert_eq!(
        held(&nodes),
        vec![1, 1, 0, 0, 0],
        "the failed nodes keep it"
    );

    // Released already on three: refused there, so no longer ours.
    nodes[0].set(Behavior::Normal);
    nodes[1].set(Behavior::Normal);
    assert!(!redlock.release(&lease).await.expect("decided"));
    settle().await;
    assert_eq!(held(&nodes), vec![0; 5], "the rest released all the same");

    // Three failing: undecided, an error.
    let lease = acquire(&redlock).await;
    for n in &nodes[..3] {
        n.set(Behavior::Fail { retryable: true });
    }
    let error = redlock.release(&lease).await.expect_err("no quorum");
    let q = quorum_error(&error).expect("QuorumNotReached");
    // Decided at the third failure; whether the two releases were counted by then is up to
    // the order the answers were polled in.
    assert_eq!((q.op, q.failed, q.required), (Op::Release, 3, 3));
    assert!(q.granted <= 2);
}

#[tokio::test(start_paused = true)]
async fn release_waits_for_a_hung_minority_only_until_the_release_timeout() {
    let nodes = nodes(5);
    let redlock = redlock(&nodes);
    let lease = acquire(&redlock).await;
    settle().await;
    nodes[3].set(Behavior::DelayBefore(Duration::from_secs(3600)));
    nodes[4].set(Behavior::DelayBefore(Duration::from_secs(3600)));
    let started = Instant::now();
    assert!(redlock.release(&lease).await.expect("ok"));
    // The hung nodes' releases are cut off at the release timeout (500 ms by default), and
    // the release returns then; their keys expire with the TTL.
    assert_eq!(since(started), lock_redlock::NODE_TIMEOUT_CEILING);
    assert_eq!(held(&nodes), vec![0, 0, 0, 1, 1]);
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_with_a_node_down_is_not_owned_not_an_error() {
    let nodes = nodes(3);
    let redlock = redlock(&nodes);
    let lease = acquire(&redlock).await;
    sleep(TTL + MS).await;
    nodes[1].set(Behavior::Fail { retryable: true });
    assert!(!redlock.release(&lease).await.expect("decided: not ours"));
    assert_eq!(redlock.extend(&lease, TTL).await.expect("decided"), None);
}
