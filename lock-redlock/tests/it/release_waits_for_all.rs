//! A release returns once every node has answered it: right after `release` returns, no node
//! holds the name any more, so the next acquire of one client never finds its own previous
//! lease on a node, whatever `Redlock` (or process) makes it. Five real nodes.

use std::time::Duration;

use lock_core::Token;
use lock_core::backend::{Attempt, Lock};

use crate::common::servers::Nodes;

/// 500 cycles × 5 nodes checked after each release, end to end on real nodes (1,000 cost 55 s of
/// a test slot on a loaded machine). A release that decides at the quorum is caught
/// deterministically by the in-memory tests (8 of them fail with it, measured); this one
/// passed with it at 1,000 cycles too, the stragglers finishing before the check's reads.
const CYCLES: usize = 500;
const NAME: &str = "release-all";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_node_holds_the_name_once_release_returns() {
    let nodes = Nodes::start(5);
    // Far above a loaded machine's stalls: the nodes are healthy, so every node answers.
    let redlock = nodes.redlock_with(|b| b.node_timeout(Duration::from_millis(900)));
    // (cycle, node) pairs where the node still held the name once `release` had returned.
    let mut stale = Vec::new();
    for cycle in 0..CYCLES {
        let attempt = redlock
            .try_acquire(
                NAME,
                Token::generate().expect("rng"),
                Duration::from_secs(30),
            )
            .await
            .expect("five healthy nodes answer");
        let Attempt::Acquired(lease) = attempt else {
            panic!("cycle {cycle}: {attempt:?}")
        };
        assert!(redlock.release(&lease).await.expect("ok"), "cycle {cycle}");
        for node in 0..nodes.len() {
            if nodes.exists(node, NAME).await {
                stale.push((cycle, node));
            }
        }
    }
    assert_eq!(
        stale.len(),
        0,
        "nodes still holding the released lease, of {CYCLES} cycles × 5 nodes: {stale:?}"
    );
}
