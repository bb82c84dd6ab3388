//! One client takes and releases one name back to back over five healthy nodes: every grant is
//! made by all five. A release that answered at the quorum and finished the last nodes in the
//! background let the next acquire find the client's own previous key there, so the grant
//! rested on four nodes (or three) instead of five. The node answers are counted through the
//! `distlock_redlock_node_*` counters of a `DebuggingRecorder`: the process's global recorder,
//! which the other tests of this binary record into too, so only the series of this test's
//! own nodes (labelled [`NODE_LABEL`]`0`..`4`, a label no other test uses) are counted.

use std::collections::BTreeMap;
use std::time::Duration;

use lock_core::Token;
use lock_core::backend::{Attempt, Lock};
use lock_redlock::Redlock;
use lock_redlock::metric::{
    NODE_ERRORS as METRIC_NODE_ERRORS, NODE_GRANTS as METRIC_NODE_GRANTS,
    NODE_REFUSALS as METRIC_NODE_REFUSALS, NODE_TIMEOUTS as METRIC_NODE_TIMEOUTS,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::common::servers::{Nodes, redis_lock};

/// Back-to-back cycles measured (after one warm-up cycle): the end-to-end check on real nodes.
/// A release that decides at the quorum is caught deterministically by the in-memory tests
/// (`release_then_acquire_memory`, `stragglers_memory`, `lagging_nodes_memory`: 8 of them fail
/// with it, measured); on healthy loopback nodes the stragglers finish before the next send,
/// and this test passed with it at 3,000 cycles as at 1,000. 3,000 cost 44 s of a test slot on
/// a loaded machine.
const CYCLES: u64 = 1_000;
const NODES: usize = 5;
const NAME: &str = "b2b-all";
/// The `node` label of this test's nodes, followed by their index.
const NODE_LABEL: &str = "b2b-all-node-";

/// Adds to `sums`, per counter name, the sum over this test's nodes of its `op="acquire"`
/// series since the last snapshot (a snapshot takes the counters' values and resets them).
fn add_acquire_answers(snapshotter: &Snapshotter, sums: &mut BTreeMap<&'static str, u64>) {
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let DebugValue::Counter(n) = value else {
            continue;
        };
        let key = key.key();
        if !key
            .labels()
            .any(|l| l.key() == "op" && l.value() == "acquire")
            || !key
                .labels()
                .any(|l| l.key() == "node" && l.value().starts_with(NODE_LABEL))
        {
            continue;
        }
        for name in [
            METRIC_NODE_GRANTS,
            METRIC_NODE_REFUSALS,
            METRIC_NODE_TIMEOUTS,
            METRIC_NODE_ERRORS,
        ] {
            if key.name() == name {
                *sums.entry(name).or_insert(0) += n;
            }
        }
    }
}

fn total(answers: &BTreeMap<&'static str, u64>) -> u64 {
    answers.values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_cycles_on_five_healthy_nodes_are_granted_by_all_five() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this process");

    let nodes = Nodes::start(NODES);
    // A node timeout below the tests' client timeout (1 s), and far above a loaded machine's
    // stalls: the nodes are healthy, so every node answers every attempt.
    let redlock = nodes
        .urls()
        .iter()
        .enumerate()
        .fold(Redlock::builder(), |b, (i, url)| {
            b.named_node(format!("{NODE_LABEL}{i}"), redis_lock(url))
        })
        .node_timeout(Duration::from_millis(900))
        .build()
        .expect("valid Redlock");
    let ttl = Duration::from_secs(30);

    // 1 warm-up cycle (connections made, scripts loaded), then CYCLES measured ones.
    for cycle in 0..=CYCLES {
        let attempt = redlock
            .try_acquire(NAME, Token::generate().expect("rng"), ttl)
            .await
            .expect("five healthy nodes answer");
        let Attempt::Acquired(lease) = attempt else {
            panic!("cycle {cycle}: {attempt:?}")
        };
        assert!(
            redlock.release(&lease).await.expect("ok"),
            "cycle {cycle}: a fresh lease released as not ours"
        );
    }
    assert!(
        nodes.wait_gone(&[0, 1, 2, 3, 4], NAME).await,
        "{NAME} left behind"
    );

    // Every attempt's five answers are counted once its round has seen them all: at most 5 s.
    let expected = (CYCLES + 1) * NODES as u64;
    let mut answers = BTreeMap::new();
    for _ in 0..500 {
        add_acquire_answers(&snapshotter, &mut answers);
        if total(&answers) >= expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let count = |name| answers.get(name).copied().unwrap_or(0);
    assert_eq!(
        total(&answers),
        expected,
        "every node answered every attempt: {answers:?}"
    );
    assert_eq!(
        count(METRIC_NODE_REFUSALS),
        0,
        "{} of the {expected} node answers to {} back-to-back acquires were refusals: the \
         node still held the client's previous lease ({answers:?})",
        count(METRIC_NODE_REFUSALS),
        CYCLES + 1,
    );
    assert_eq!(
        count(METRIC_NODE_GRANTS),
        expected,
        "every acquire granted by all {NODES} nodes: {answers:?}"
    );
}
