//! The quorum and validity rules of an acquire, over in-process nodes on tokio's paused clock:
//! every duration asserted here is exact, not wall-clock.

use std::time::Duration;

use crate::common::memory::{
    Behavior, MS, held, hold_directly, nodes, quorum_error, redlock, scripted, settle, since,
};
use lock_core::backend::{Attempt, Lock};
use lock_core::{LockError, MAX_TTL, Op, Token};
use lock_redlock::ValidityExpired;
use tokio::time::Instant;

use crate::common;

const TTL: Duration = Duration::from_secs(60);

fn token() -> Token {
    Token::generate().expect("rng")
}

fn lease_of(attempt: Attempt) -> lock_core::Lease {
    match attempt {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("expected a grant, got {attempt:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn n_of_1_3_5_grant_on_every_node() {
    for n in [1, 3, 5] {
        let nodes = nodes(n);
        let redlock = redlock(&nodes);
        let started = Instant::now();
        let lease = lease_of(redlock.try_acquire("a", token(), TTL).await.expect("ok"));
        assert_eq!(
            lease.valid_until(),
            started + TTL - redlock.drift(TTL),
            "N = {n}: validity is ttl − elapsed (0) − drift"
        );
        settle().await;
        assert_eq!(held(&nodes), vec![1; n], "N = {n}: every node granted");
        assert!(redlock.release(&lease).await.expect("ok"));
        settle().await;
        assert_eq!(held(&nodes), vec![0; n]);
    }
}

#[tokio::test(start_paused = true)]
async fn answers_at_the_quorum_th_answer_and_counts_it_against_validity() {
    let ttl = TTL;
    // Requests that take 10, 20 and 30 ms to arrive: the quorum (2) is there at 20 ms.
    let nodes = scripted(&[
        Behavior::DelayBefore(10 * MS),
        Behavior::DelayBefore(20 * MS),
        Behavior::DelayBefore(30 * MS),
    ]);
    let redlock = redlock(&nodes);
    let started = Instant::now();
    let lease = lease_of(redlock.try_acquire("a", token(), ttl).await.expect("ok"));
    assert_eq!(since(started), 20 * MS, "did not wait for the slowest node");
    // valid_until counts from before the requests: start + ttl − drift (602 ms for 60 s).
    assert_eq!(redlock.drift(ttl), 602 * MS);
    assert_eq!(lease.valid_until(), started + ttl - redlock.drift(ttl));
    assert_eq!(lease.remaining(), ttl - redlock.drift(ttl) - 20 * MS);
    // The late node granted too: it is part of the lease, and release covers it.
    settle().await;
    assert_eq!(held(&nodes), vec![1, 1, 1]);
    assert!(redlock.release(&lease).await.expect("ok"));
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_node_slower_than_the_node_timeout_counts_as_failed() {
    // 1 fast node of 3: the quorum needs a slow one, which times out at the node timeout.
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::DelayBefore(Duration::from_secs(10)),
        Behavior::DelayBefore(Duration::from_secs(10)),
    ]);
    let redlock = redlock(&nodes);
    let timeout = redlock.node_timeout(TTL);
    assert_eq!(
        timeout,
        Duration::from_millis(500),
        "2 % of 60 s, capped at 500 ms"
    );
    let started = Instant::now();
    let error = redlock
        .try_acquire("a", token(), TTL)
        .await
        .expect_err("no quorum");
    assert_eq!(since(started), timeout, "bounded by the node timeout");
    assert!(error.is_retryable());
    let q = quorum_error(&error).expect("a QuorumNotReached source");
    assert_eq!(
        (q.op, q.granted, q.required, q.nodes, q.refused, q.failed),
        (Op::Acquire, 1, 2, 3, 0, 2)
    );
    assert!(matches!(q.first_error(), Some(LockError::Timeout { .. })));
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0], "the one grant was released");
}

#[tokio::test(start_paused = true)]
async fn a_quorum_that_answers_too_late_is_validity_expired() {
    // TTL 100 ms, drift 3 ms: every node answers at 97 ms, the last instant the node timeout
    // allows, leaving exactly zero validity.
    let ttl = Duration::from_millis(100);
    let nodes = scripted(&[Behavior::DelayAfter(97 * MS); 3]);
    let redlock = redlock(&nodes);
    assert_eq!(redlock.drift(ttl), 3 * MS);
    assert_eq!(redlock.node_timeout(ttl), 50 * MS, "the 50 ms floor");
    let redlock = common::memory::builder(&nodes)
        .node_timeout(Duration::from_secs(5))
        .build()
        .expect("valid");
    assert_eq!(redlock.node_timeout(ttl), 97 * MS, "capped at ttl − drift");
    let error = redlock
        .try_acquire("a", token(), ttl)
        .await
        .expect_err("no validity left");
    let expired = std::error::Error::source(&error)
        .and_then(|s| s.downcast_ref::<ValidityExpired>())
        .expect("a ValidityExpired source");
    assert_eq!(
        (expired.granted, expired.ttl, expired.elapsed, expired.drift),
        (2, ttl, 97 * MS, 3 * MS),
        "decided at the quorum-th (2nd) answer"
    );
    assert!(error.is_retryable());
    // Every grant is released (before the nodes' keys would expire on their own).
    settle().await;
    assert!(
        nodes.iter().all(|n| n.calls().2 == 1),
        "released on every node"
    );
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_busy_majority_is_busy_with_the_time_until_a_quorum_can_free_up() {
    let nodes = nodes(5);
    for (i, secs) in [(0, 30), (1, 10), (2, 20)] {
        hold_directly(&nodes[i], "a", Duration::from_secs(secs)).await;
    }
    let redlock = redlock(&nodes);
    let attempt = redlock.try_acquire("a", token(), TTL).await.expect("ok");
    assert_eq!(
        attempt,
        Attempt::Busy {
            holder_ttl: Some(Duration::from_secs(10)),
            announces: true,
        },
        "three busy of five: the first to expire frees a quorum"
    );
    settle().await;
    assert_eq!(held(&nodes), vec![1, 1, 1, 0, 0], "our two grants released");
}

#[tokio::test(start_paused = true)]
async fn every_node_busy_reports_the_quorum_th_smallest_ttl() {
    let nodes = nodes(5);
    for (i, secs) in [(0, 50), (1, 10), (2, 40), (3, 20), (4, 30)] {
        hold_directly(&nodes[i], "a", Duration::from_secs(secs)).await;
    }
    let attempt = redlock(&nodes)
        .try_acquire("a", token(), TTL)
        .await
        .expect("ok");
    // Decided at the third "busy"; which three answered first is up to the scheduler, so the
    // cap is the smallest TTL among them — at most the quorum-th smallest of all.
    let Attempt::Busy {
        holder_ttl: Some(ttl),
        ..
    } = attempt
    else {
        panic!("busy expected, got {attempt:?}")
    };
    assert!(ttl <= Duration::from_secs(30), "{ttl:?}");
}

#[tokio::test(start_paused = true)]
async fn a_split_vote_is_busy_not_an_error() {
    // Four nodes, quorum three; another holder has two: contention, not failure.
    let nodes = nodes(4);
    hold_directly(&nodes[0], "a", TTL).await;
    hold_directly(&nodes[1], "a", TTL).await;
    let attempt = redlock(&nodes)
        .try_acquire("a", token(), TTL)
        .await
        .expect("ok");
    assert!(matches!(attempt, Attempt::Busy { .. }), "{attempt:?}");
    settle().await;
    assert_eq!(held(&nodes), vec![1, 1, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_minority_down_does_not_turn_busy_into_an_error() {
    // Three nodes, the lock held elsewhere; one node down. After "busy" and "down" no quorum
    // is possible, but whether the lock is busy depends on the third node: wait for it.
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::Fail { retryable: true },
        Behavior::DelayAfter(20 * MS),
    ]);
    hold_directly(&nodes[0], "a", TTL).await;
    hold_directly(&nodes[2], "a", TTL).await;
    let started = Instant::now();
    let attempt = redlock(&nodes)
        .try_acquire("a", token(), TTL)
        .await
        .expect("busy, not an error");
    assert!(matches!(attempt, Attempt::Busy { .. }), "{attempt:?}");
    assert_eq!(
        since(started),
        20 * MS,
        "waited for the node that could refuse"
    );
}

#[tokio::test(start_paused = true)]
async fn failing_nodes_give_a_retryable_quorum_error_and_grants_are_released() {
    let fail = Behavior::Fail { retryable: true };
    let nodes = scripted(&[Behavior::Normal, Behavior::Normal, fail, fail, fail]);
    let error = redlock(&nodes)
        .try_acquire("a", token(), TTL)
        .await
        .expect_err("no quorum");
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
    assert_eq!(q.required, 3);
    assert_eq!(q.failed, 3, "{q}");
    assert!(q.granted <= 2);
    assert!(error.to_string().contains("redlock"), "{error}");
    settle().await;
    assert_eq!(held(&nodes), vec![0; 5], "nothing left behind");
    // Failed nodes are released too (their request may have been applied).
    assert!(nodes[2..].iter().all(|n| n.calls().2 == 1));
}

#[tokio::test(start_paused = true)]
async fn non_retryable_node_errors_that_block_the_quorum_are_not_retryable() {
    let fatal = Behavior::Fail { retryable: false };
    let nodes = scripted(&[Behavior::Normal, fatal, fatal]);
    let error = redlock(&nodes)
        .try_acquire("a", token(), TTL)
        .await
        .expect_err("no quorum");
    assert!(!error.is_retryable(), "{error:?}");
    // One non-retryable node of three does not make it hopeless.
    let nodes = scripted(&[fatal, Behavior::Fail { retryable: true }, Behavior::Normal]);
    let error = redlock(&nodes)
        .try_acquire("a", token(), TTL)
        .await
        .expect_err("no quorum");
    assert!(error.is_retryable(), "{error:?}");
}

#[tokio::test(start_paused = true)]
async fn input_the_nodes_refuse_is_invalid_input() {
    let nodes = scripted(&[Behavior::Invalid; 3]);
    let error = redlock(&nodes)
        .try_acquire("a", token(), TTL)
        .await
        .expect_err("refused");
    assert!(matches!(error, LockError::InvalidInput { .. }), "{error:?}");
    settle().await;
    assert!(nodes.iter().all(|n| n.calls().2 == 0), "nothing to release");
}

#[tokio::test(start_paused = true)]
async fn ttl_edges_never_panic_nor_grant_an_expired_lease() {
    let nodes = nodes(3);
    let redlock = redlock(&nodes);
    // 1 ms and 2 ms are not longer than their drift allowance (2.01 / 2.02 ms): refused before
    // any I/O, as is anything check_ttl refuses.
    for ttl in [
        MS,
        2 * MS,
        Duration::ZERO,
        Duration::from_micros(999),
        MAX_TTL + MS,
        Duration::MAX,
    ] {
        let error = redlock
            .try_acquire("a", token(), ttl)
            .await
            .expect_err("refused");
        assert!(
            matches!(error, LockError::InvalidInput { .. }),
            "{ttl:?}: {error:?}"
        );
    }
    assert!(nodes.iter().all(|n| n.calls() == (0, 0, 0)), "nothing sent");
    // 3 ms: valid for 3 − 2.03 = 0.97 ms.
    let drift = redlock.drift(3 * MS);
    assert!(
        drift > 2 * MS && drift < Duration::from_micros(2_031),
        "{drift:?}"
    );
    let started = Instant::now();
    let lease = lease_of(redlock.try_acquire("a", token(), 3 * MS).await.expect("ok"));
    assert_eq!(lease.valid_until(), started + 3 * MS - drift);
    // 3.9 ms counts as the 3 ms the nodes apply.
    let started = Instant::now();
    let b = lease_of(
        redlock
            .try_acquire("b", token(), Duration::from_micros(3_900))
            .await
            .expect("ok"),
    );
    assert_eq!(b.valid_until(), started + 3 * MS - drift);
    // The longest TTL: valid for 99 % of it, no overflow.
    let lease = lease_of(
        redlock
            .try_acquire("c", token(), MAX_TTL)
            .await
            .expect("ok"),
    );
    assert!(lease.remaining() > MAX_TTL / 100 * 98);
    assert!(redlock.release(&lease).await.expect("ok"));
}
