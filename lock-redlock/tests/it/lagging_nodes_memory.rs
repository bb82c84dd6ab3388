//! A release waits for every node that is not lagging: a node whose last call timed out or
//! failed costs one release its timeout (or the time to its error), not every release, and is
//! waited for again once a call of it answers. In-process nodes, tokio's paused clock, so the
//! elapsed times asserted are exact.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Lease, Token};
use lock_redlock::{NODE_TIMEOUT_CEILING, Redlock};
use tokio::time::{Instant, sleep};

use crate::common::memory::{Behavior, MS, Scripted, held, redlock, scripted, settle, since};

const TTL: Duration = Duration::from_secs(60);
const HUNG: Behavior = Behavior::DelayBefore(Duration::from_secs(3600));

async fn granted(redlock: &Redlock, name: &str) -> Lease {
    let token = Token::generate().expect("rng");
    match redlock.try_acquire(name, token, TTL).await.expect("ok") {
        Attempt::Acquired(lease) => lease,
        busy @ Attempt::Busy { .. } => panic!("{busy:?}"),
    }
}

/// How long `release(lease)` took on the paused clock; it must have released at a quorum.
async fn release_time(redlock: &Redlock, lease: &Lease) -> Duration {
    let started = Instant::now();
    assert!(
        redlock.release(lease).await.expect("ok"),
        "a quorum released"
    );
    since(started)
}

/// Acquires and releases `name` `cycles` times; each acquire must answer at once (at the
/// quorum), and each release's duration is returned.
async fn cycles(redlock: &Redlock, name: &str, cycles: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let started = Instant::now();
        let lease = granted(redlock, name).await;
        assert_eq!(since(started), Duration::ZERO, "granted at the quorum");
        times.push(release_time(redlock, &lease).await);
    }
    times
}

#[tokio::test(start_paused = true)]
async fn a_hung_node_costs_the_first_release_its_timeout_and_later_ones_nothing() {
    let nodes = scripted(&[Behavior::Normal, Behavior::Normal, HUNG]);
    let redlock = redlock(&nodes);
    let times = cycles(&redlock, "a", 20).await;
    assert_eq!(
        times[0], NODE_TIMEOUT_CEILING,
        "the first release waited for it"
    );
    assert_eq!(
        times[1..],
        [Duration::ZERO; 19],
        "the releases after it did not wait for the lagging node"
    );
    settle().await;
    // Each release was still sent to the hung node, in the background.
    assert_eq!(nodes[2].calls().2, 20);
    assert_eq!(held(&nodes), vec![0, 0, 0], "node 2 never applied anything");
}

#[tokio::test(start_paused = true)]
async fn a_node_that_answers_an_acquire_again_is_waited_for_again() {
    let nodes = scripted(&[Behavior::Normal, Behavior::Normal, HUNG]);
    let redlock = redlock(&nodes);
    assert_eq!(
        cycles(&redlock, "a", 3).await,
        [NODE_TIMEOUT_CEILING, Duration::ZERO, Duration::ZERO]
    );
    back_up(&redlock, &nodes, 2).await;
    assert_eq!(held(&nodes), vec![0, 0, 0], "released everywhere on return");
}

#[tokio::test(start_paused = true)]
async fn a_late_answer_seen_through_in_the_background_ends_the_lag() {
    // Three leases held on three healthy nodes; then node 2 turns slow: 700 ms a call, past
    // the 500 ms release timeout.
    let nodes = scripted(&[Behavior::Normal; 3]);
    let redlock = redlock(&nodes);
    let (a, b, c) = (
        granted(&redlock, "a").await,
        granted(&redlock, "b").await,
        granted(&redlock, "c").await,
    );
    settle().await;
    nodes[2].set(Behavior::DelayBefore(700 * MS));
    // t = 0: times out on node 2 at 500 ms; node 2 is lagging from then on. Its release there
    // still lands, at 700 ms, in the background.
    assert_eq!(release_time(&redlock, &a).await, NODE_TIMEOUT_CEILING);
    // t = 500 ms: not waited for; its call on node 2 lands at 1,200 ms.
    assert_eq!(release_time(&redlock, &b).await, Duration::ZERO);
    // t = 800 ms: node 2 answered `a`'s release (counted as timed out in its round) at 700 ms,
    // so it is no longer lagging although `b`'s call is still out: `c`'s release waits for it.
    sleep(300 * MS).await;
    assert_eq!(
        held(&nodes),
        vec![1, 1, 2],
        "a's release landed on node 2, b's not yet"
    );
    nodes[2].set(Behavior::DelayBefore(30 * MS));
    assert_eq!(release_time(&redlock, &c).await, 30 * MS);
    settle().await;
    assert_eq!(held(&nodes), vec![0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_down_node_costs_only_the_first_release_the_time_to_its_error() {
    let nodes = scripted(&[Behavior::Normal; 3]);
    let redlock = redlock(&nodes);
    let lease = granted(&redlock, "x").await;
    settle().await;
    // Node 2 goes down: every call is refused after 20 ms (a connection attempt).
    nodes[2].set(Behavior::FailAfter(20 * MS));
    assert_eq!(
        release_time(&redlock, &lease).await,
        20 * MS,
        "waited for its error"
    );
    assert_eq!(cycles(&redlock, "a", 10).await, [Duration::ZERO; 10]);
    back_up(&redlock, &nodes, 2).await;
    assert_eq!(
        held(&nodes),
        vec![0, 0, 1],
        "only x's key on node 2, never released there, is left (until its TTL)"
    );
}

/// Brings `nodes[back]` back, slow (its calls take 30 ms); once its calls from before are
/// over, an acquire reaches it and it grants (it answered), and the next release waits for it
/// again.
async fn back_up(redlock: &Redlock, nodes: &[Arc<Scripted>], back: usize) {
    nodes[back].set(Behavior::DelayBefore(30 * MS));
    settle().await;
    let before = held(nodes)[back];
    let lease = granted(redlock, "a").await;
    sleep(31 * MS).await;
    assert_eq!(held(nodes)[back], before + 1, "it granted");
    assert_eq!(
        release_time(redlock, &lease).await,
        30 * MS,
        "the release waited for it again"
    );
}
