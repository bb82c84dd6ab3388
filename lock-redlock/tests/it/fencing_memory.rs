//! What the Redlock fencing token is, and the limit the crate docs state: it is the largest
//! token among the grants, which orders successive grants only when the nodes' tokens are
//! comparable across nodes (RedisLock's clock-based tokens are; plain counters are not).

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, Token};

use crate::common;
use crate::common::memory::{Behavior, hold_directly, nodes, redlock, settle};

const TTL: Duration = Duration::from_secs(60);

async fn grant(redlock: &lock_redlock::Redlock, name: &str) -> Lease {
    match redlock
        .try_acquire(name, Token::generate().expect("rng"), TTL)
        .await
        .expect("ok")
    {
        Attempt::Acquired(lease) => lease,
        busy => panic!("expected a grant, got {busy:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_token_is_the_largest_among_the_grants() {
    let nodes = nodes(3);
    // Node 1's counter runs ahead: it has granted 41 other locks.
    for i in 0..41 {
        hold_directly(&nodes[1], &format!("other-{i}"), TTL).await;
    }
    let redlock = common::memory::builder(&nodes).build().expect("valid");
    // Make node 1 answer last, after the decision: its token cannot count.
    nodes[1].set(Behavior::DelayBefore(Duration::from_millis(5)));
    let lease = grant(&redlock, "a").await;
    assert_eq!(lease.fencing_token(), 1, "max of nodes 0 and 2 (both 1)");
    settle().await;
    // Now every node answers at once: node 1's 43 is the largest.
    nodes[1].set(Behavior::Normal);
    let lease = grant(&redlock, "b").await;
    assert_eq!(lease.fencing_token(), 43);
}

#[tokio::test(start_paused = true)]
async fn plain_counters_do_not_order_successive_grants() {
    // The documented limit, shown: G1 is granted by {0, 1, 2} and released while nodes 3 and 4
    // are down; G2 by {2, 3, 4}, sharing node 2 with G1, whose counter did increase. Yet
    // G2's token is not larger than G1's, because node 0's counter ran ahead of the others.
    let nodes = nodes(5);
    for i in 0..100 {
        hold_directly(&nodes[0], &format!("other-{i}"), TTL).await;
    }
    let redlock = redlock(&nodes);
    for n in &nodes[3..] {
        n.set(Behavior::Fail { retryable: true });
    }
    let g1 = grant(&redlock, "a").await;
    assert!(redlock.release(&g1).await.expect("ok"));
    for n in &nodes[3..] {
        n.set(Behavior::Normal);
    }
    for n in &nodes[..2] {
        n.set(Behavior::Fail { retryable: true });
    }
    let g2 = grant(&redlock, "a").await;
    assert_eq!(g1.fencing_token(), 101);
    assert_eq!(g2.fencing_token(), 2);
    assert!(
        g2.fencing_token() < g1.fencing_token(),
        "not monotonic across nodes whose counters are not comparable"
    );
}
