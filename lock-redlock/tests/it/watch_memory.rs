//! Release announcements through a Redlock: one signal fed by every node that can announce,
//! offered only when enough nodes subscribed that no quorum release can be missed.

use std::time::Duration;

use lock_core::backend::Lock;
use tokio::time::{sleep, timeout};

use crate::common::memory::{Behavior, nodes, redlock};

#[tokio::test(start_paused = true)]
async fn any_node_announcement_bumps_the_combined_signal() {
    let nodes = nodes(5);
    // Three of five announce: N − quorum + 1 = 3, enough.
    let signals: Vec<_> = nodes[..3].iter().map(|n| n.announce()).collect();
    let redlock = redlock(&nodes);
    let watch = redlock
        .watch("a")
        .await
        .expect("ok")
        .expect("enough nodes announce");
    let combined = watch.signal().clone();
    for (i, signal) in signals.iter().enumerate() {
        let seen = combined.generation();
        signal.notify();
        timeout(Duration::from_secs(1), combined.changed_since(seen))
            .await
            .unwrap_or_else(|_| panic!("node {i}'s announcement reached the combined signal"));
    }
    // Dropped: the forwarders stop; the nodes' signals no longer reach anything.
    drop(watch);
    sleep(Duration::from_millis(1)).await;
    let seen = combined.generation();
    signals[0].notify();
    sleep(Duration::from_millis(10)).await;
    assert_eq!(combined.generation(), seen);
}

#[tokio::test(start_paused = true)]
async fn too_few_announcing_nodes_means_polling() {
    let nodes = nodes(5);
    nodes[0].announce();
    nodes[1].announce();
    let redlock = redlock(&nodes);
    assert!(redlock.watch("a").await.expect("ok").is_none());
    // A node that fails to subscribe does not count either.
    nodes[2].announce();
    nodes[2].set(Behavior::Fail { retryable: true });
    assert!(redlock.watch("a").await.expect("ok").is_none());
    nodes[2].set(Behavior::Normal);
    assert!(redlock.watch("a").await.expect("ok").is_some());
}
