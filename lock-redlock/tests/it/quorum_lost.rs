//! Three of five nodes down or hung: no lock, a quorum error fast, nothing left on the live
//! nodes.

use std::time::{Duration, Instant};

use lock_core::backend::Lock;
use lock_core::{LockError, Locker, Op, Token};

use crate::common::memory::quorum_error;
use crate::common::servers::{FAST, Nodes, Paused};

#[tokio::test]
async fn three_of_five_down_is_a_quorum_error_and_leaves_nothing() {
    let mut nodes = Nodes::start(5);
    let redlock = nodes.redlock();
    for i in 2..5 {
        nodes.servers[i].stop();
    }
    let started = Instant::now();
    let error = redlock
        .try_acquire(
            "job",
            Token::generate().expect("rng"),
            Duration::from_secs(10),
        )
        .await
        .expect_err("no quorum");
    assert!(started.elapsed() < FAST, "took {:?}", started.elapsed());
    assert!(
        matches!(
            error,
            LockError::QuorumNotReached {
                backend: "redlock",
                op: Op::Acquire,
                retryable: true,
                ..
            }
        ),
        "{error:?}"
    );
    let q = quorum_error(&error).expect("QuorumNotReached");
    assert_eq!((q.required, q.nodes, q.failed), (3, 5, 3), "{q}");
    assert!(q.first_error().is_some());
    assert!(
        nodes.wait_gone(&[0, 1], "job").await,
        "the live nodes' grants were released"
    );

    // Through a Locker: retried within the wait, then the quorum error.
    let locker = Locker::new(redlock);
    let error = locker
        .lock("job")
        .wait(Duration::from_millis(500))
        .await
        .expect_err("no quorum");
    assert!(quorum_error(&error).is_some(), "{error:?}");
    assert!(nodes.wait_gone(&[0, 1], "job").await);

    // Back up (empty): works again.
    for i in 2..5 {
        nodes.servers[i].start_again().expect("restart");
    }
    let guard = locker
        .lock("job")
        .wait(Duration::from_secs(5))
        .await
        .expect("granted");
    guard.release().await.expect("ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_of_five_hung_is_a_quorum_error_within_the_node_timeout() {
    let nodes = Nodes::start(5);
    let redlock = nodes.redlock();
    let locker = Locker::new(redlock.clone());
    let warm = locker.lock("job").await.expect("all up");
    warm.release().await.expect("ok");
    assert!(nodes.wait_gone(&[0, 1, 2, 3, 4], "job").await);
    {
        let _paused: Vec<_> = (2..5).map(|i| Paused::pause(&nodes.servers[i])).collect();
        let ttl = Duration::from_secs(10);
        let started = Instant::now();
        let error = redlock
            .try_acquire("job", Token::generate().expect("rng"), ttl)
            .await
            .expect_err("no quorum");
        let elapsed = started.elapsed();
        assert!(
            elapsed >= redlock.node_timeout(ttl) && elapsed < FAST,
            "waited the node timeout, no more: {elapsed:?}"
        );
        let q = quorum_error(&error).expect("QuorumNotReached");
        assert_eq!((q.granted, q.failed), (2, 3), "{q}");
        assert!(matches!(q.first_error(), Some(LockError::Timeout { .. })));
        assert!(nodes.wait_gone(&[0, 1], "job").await);
    }
    // Resumed: their queued acquire and the release behind it are applied in order.
    assert!(
        nodes.wait_gone(&[0, 1, 2, 3, 4], "job").await,
        "nothing left on the resumed nodes"
    );
}

/// The start-up check: a quorum of nodes answering is enough, fewer is a quorum error.
#[tokio::test]
async fn ping_needs_a_quorum_of_nodes() {
    let mut nodes = Nodes::start(5);
    let locker = Locker::new(nodes.redlock());
    locker.ping().await.expect("all five up");
    nodes.servers[4].stop();
    nodes.servers[3].stop();
    locker
        .ping()
        .await
        .expect("three of five still make a quorum");
    nodes.servers[2].stop();
    let error = locker.ping().await.expect_err("two of five");
    assert!(
        matches!(
            error,
            LockError::QuorumNotReached {
                op: Op::Connect,
                retryable: true,
                ..
            }
        ),
        "{error:?}"
    );
}
