//! A release returns once every node has finished it (or its timeout passed; a hung node:
//! `lagging_nodes_memory.rs`); a failed
//! acquire's cleanup, or a cancelled release, finishes in the background, and the next acquire
//! of the name by the same `Redlock` reaches each node only after it, so it does not find our
//! previous key there. In-process nodes, tokio's paused clock.

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, Token};
use tokio::time::{Instant, sleep, timeout};

use crate::common::memory::{Behavior, MS, held, redlock, scripted, settle, since};

const TTL: Duration = Duration::from_secs(60);

fn token() -> Token {
    Token::generate().expect("rng")
}

async fn granted(redlock: &lock_redlock::Redlock, name: &str) -> Lease {
    match redlock.try_acquire(name, token(), TTL).await.expect("ok") {
        Attempt::Acquired(lease) => lease,
        busy @ Attempt::Busy { .. } => panic!("{busy:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_release_returns_once_a_slow_node_has_finished_it() {
    // Node 2 applies everything 30 ms late. Lease 1 is granted by 0 and 1 at once (node 2
    // grants at 30 ms) and released at once; on node 2 the release lands at 60 ms, and the
    // release returns then. Lease 2, asked for at once, is granted by all three.
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::Normal,
        Behavior::DelayBefore(30 * MS),
    ]);
    let redlock = redlock(&nodes);
    let first = granted(&redlock, "a").await;
    let started = Instant::now();
    assert!(redlock.release(&first).await.expect("ok"));
    assert_eq!(since(started), 60 * MS, "returned once node 2 had released");
    assert_eq!(held(&nodes), vec![0, 0, 0]);
    let started = Instant::now();
    let second = granted(&redlock, "a").await;
    assert_eq!(since(started), Duration::ZERO, "answered at the quorum");
    sleep(31 * MS).await;
    assert_eq!(held(&nodes), vec![1, 1, 1], "granted by all three");
    assert!(redlock.release(&second).await.expect("ok"));
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn the_next_acquire_reaches_a_node_after_a_failed_acquires_cleanup() {
    // Another holder has the name on 0 and 1: our first attempt is busy at once, and node 2
    // grants it at 30 ms, so the round releases it there (landing at 60 ms). The holder leaves;
    // our next attempt must reach node 2 after that cleanup.
    let nodes = scripted(&[
        Behavior::Normal,
        Behavior::Normal,
        Behavior::DelayBefore(30 * MS),
    ]);
    let mut holder = Vec::new();
    for node in &nodes[..2] {
        match node.inner.try_acquire("a", token(), TTL).await.expect("ok") {
            Attempt::Acquired(lease) => holder.push(lease),
            busy @ Attempt::Busy { .. } => panic!("{busy:?}"),
        }
    }
    let redlock = redlock(&nodes);
    let attempt = redlock.try_acquire("a", token(), TTL).await.expect("ok");
    assert!(matches!(attempt, Attempt::Busy { .. }), "{attempt:?}");
    for (node, lease) in nodes.iter().zip(&holder) {
        assert!(node.inner.release(lease).await.expect("ok"));
    }
    let ours = granted(&redlock, "a").await;
    sleep(59 * MS).await;
    assert_eq!(
        nodes[2].calls().0,
        1,
        "not sent before the cleanup finished"
    );
    sleep(40 * MS).await;
    assert_eq!(held(&nodes), vec![1, 1, 1], "granted by all three");
    assert!(redlock.release(&ours).await.expect("ok"));
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_release_is_still_waited_for() {
    // Node 2 answers 30 ms late; the release is dropped before any node answered.
    let nodes = scripted(&[
        Behavior::DelayBefore(10 * MS),
        Behavior::DelayBefore(10 * MS),
        Behavior::DelayBefore(30 * MS),
    ]);
    let redlock = redlock(&nodes);
    let first = granted(&redlock, "a").await;
    settle().await; // every grant landed, node 2's too
    assert!(
        timeout(MS, redlock.release(&first)).await.is_err(),
        "cancelled"
    );
    let second = granted(&redlock, "a").await;
    settle().await;
    assert_eq!(held(&nodes), vec![1, 1, 1], "granted by all three");
    assert_eq!(
        nodes.iter().map(|n| n.calls().2).collect::<Vec<_>>(),
        [1, 1, 1]
    );
    assert!(redlock.release(&second).await.expect("ok"));
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}
