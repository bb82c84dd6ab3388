//! Acquire then release at once, over and over, on a multi-threaded runtime with five real
//! nodes: the release races the acquires still in flight on the slower nodes, and must still
//! find our keys on a quorum (`true`), and leave nothing behind.

use std::time::Duration;

use lock_core::Token;
use lock_core::backend::{Attempt, Lock};

use crate::common::servers::Nodes;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fresh_lease_releases_as_ours() {
    let nodes = Nodes::start(5);
    let redlock = nodes.redlock();
    for i in 0..1_000 {
        let name = format!("b2b-{}", i % 16);
        let attempt = redlock
            .try_acquire(
                &name,
                Token::generate().expect("rng"),
                Duration::from_secs(10),
            )
            .await
            .expect("ok");
        let Attempt::Acquired(lease) = attempt else {
            panic!("round {i}: {attempt:?}")
        };
        assert!(
            redlock.release(&lease).await.expect("ok"),
            "round {i}: a fresh lease released as not ours"
        );
    }
    for i in 0..16 {
        assert!(
            nodes.wait_gone(&[0, 1, 2, 3, 4], &format!("b2b-{i}")).await,
            "b2b-{i} left behind"
        );
    }
}
