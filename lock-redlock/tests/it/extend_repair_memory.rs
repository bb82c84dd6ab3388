//! Extend repair's rules, on in-process nodes and tokio's paused clock: it follows only a
//! quorum extend, goes through the node's acquire (so a node that grants nothing for now is
//! left alone until it grants again), and a release is ordered after a repair in flight.

use std::time::Duration;

use lock_core::Token;
use lock_core::backend::{Attempt, Lock};
use lock_redlock::Redlock;

use crate::common::memory::{Behavior, Scripted, held, nodes, redlock, settle};

const TTL: Duration = Duration::from_secs(60);

async fn acquire(redlock: &Redlock) -> lock_core::Lease {
    match redlock
        .try_acquire("a", Token::generate().expect("rng"), TTL)
        .await
        .expect("ok")
    {
        Attempt::Acquired(lease) => lease,
        busy => panic!("expected a grant, got {busy:?}"),
    }
}

/// The node loses every key (a restart without persistence).
async fn lose_key(node: &Scripted, lease: &lock_core::Lease) {
    assert!(node.inner.release(lease).await.expect("memory"), "held it");
}

fn acquires(node: &Scripted) -> u32 {
    node.calls().0
}

#[tokio::test(start_paused = true)]
async fn a_node_that_grants_nothing_for_now_is_repaired_once_it_grants_again() {
    let nodes = nodes(5);
    let redlock = redlock(&nodes);
    let lease = acquire(&redlock).await;
    settle().await;
    lose_key(&nodes[2], &lease).await;
    nodes[2].set(Behavior::RefuseAcquire);

    let tried = acquires(&nodes[2]);
    assert!(redlock.extend(&lease, TTL).await.expect("ok").is_some());
    assert_eq!(acquires(&nodes[2]), tried + 1, "a repair was sent");
    assert_eq!(held(&nodes), vec![1, 1, 0, 1, 1], "and refused");
    // The other nodes never lost it: no repair there.
    for node in [0, 1, 3, 4] {
        assert_eq!(acquires(&nodes[node]), 1, "node {node}");
    }

    nodes[2].set(Behavior::Normal);
    assert!(redlock.extend(&lease, TTL).await.expect("ok").is_some());
    assert_eq!(held(&nodes), vec![1; 5], "repaired");
    // With the lease's own token: extend and release count it as ours.
    assert!(redlock.extend(&lease, TTL).await.expect("ok").is_some());
    assert_eq!(acquires(&nodes[2]), tried + 2, "no repair needed any more");
    assert!(redlock.release(&lease).await.expect("ok"));
    assert_eq!(held(&nodes), vec![0; 5]);
}

#[tokio::test(start_paused = true)]
async fn an_extend_without_a_quorum_repairs_nothing() {
    let nodes = nodes(5);
    let redlock = redlock(&nodes);
    let lease = acquire(&redlock).await;
    settle().await;
    for node in &nodes[..3] {
        lose_key(node, &lease).await;
    }
    assert_eq!(redlock.extend(&lease, TTL).await.expect("decided"), None);
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0, 1, 1], "no key recreated");
    for node in &nodes {
        assert_eq!(acquires(node), 1, "only the first acquire");
    }
}

#[tokio::test(start_paused = true)]
async fn a_release_waits_for_a_repair_still_in_flight() {
    let nodes = nodes(5);
    let redlock = redlock(&nodes);
    let lease = acquire(&redlock).await;
    settle().await;
    lose_key(&nodes[2], &lease).await;
    // The repair reaches node 2 only after 100 ms (within its 500 ms node timeout).
    nodes[2].set(Behavior::SlowAcquire(Duration::from_millis(100)));
    // The extend is given up (dropped) while its repair is on its way.
    let gave_up =
        tokio::time::timeout(Duration::from_millis(50), redlock.extend(&lease, TTL)).await;
    assert!(gave_up.is_err(), "dropped during the repair");
    // The release on node 2 goes after the repair there, so it finds the key and removes it;
    // sent at once, it would find nothing and the repair would then strand our key.
    assert!(redlock.release(&lease).await.expect("ok"));
    settle().await;
    assert_eq!(held(&nodes), vec![0; 5], "no key left behind");
    assert_eq!(acquires(&nodes[2]), 2, "the repair was sent");
}
