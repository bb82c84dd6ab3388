//! The counters after a scripted scenario, read from a `DebuggingRecorder` installed for this
//! thread only (`metrics::with_local_recorder`), on a current-thread runtime with a paused
//! clock so every round, background parts included, runs on this thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lock_core::Token;
use lock_core::backend::{Attempt, Lock};
use lock_redlock::Redlock;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

use crate::common;
use crate::common::memory::{Behavior, Scripted, hold_directly, scripted, settle};

const TTL: Duration = Duration::from_secs(60);

type Counters = BTreeMap<String, u64>;

/// `name{label=value,...}` → value, labels sorted.
fn counters(recorder: &DebuggingRecorder) -> Counters {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let DebugValue::Counter(n) = value else {
                return None;
            };
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            Some((format!("{}{{{}}}", key.name(), labels.join(",")), n))
        })
        .collect()
}

async fn acquire(redlock: &Redlock, name: &str, ttl: Duration) -> Option<Attempt> {
    redlock
        .try_acquire(name, Token::generate().expect("rng"), ttl)
        .await
        .ok()
}

async fn scenario(nodes: &[Arc<Scripted>], redlock: &Redlock) {
    let (_a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    // 1. Node "2" fails: granted by "0" and "1"; released on all three.
    c.set(Behavior::Fail { retryable: true });
    let Some(Attempt::Acquired(x)) = acquire(redlock, "x", TTL).await else {
        panic!("granted")
    };
    assert!(redlock.release(&x).await.expect("ok"));
    settle().await;
    // 2. Node "1" hangs: granted by "0" and "2"; "1" times out on acquire and on release.
    c.set(Behavior::Normal);
    b.set(Behavior::DelayBefore(Duration::from_secs(10)));
    let Some(Attempt::Acquired(y)) = acquire(redlock, "y", TTL).await else {
        panic!("granted")
    };
    assert!(redlock.release(&y).await.expect("ok"));
    settle().await;
    // 3. Another holder has "z" on "0" and "2": busy; our grant on "1" is released.
    b.set(Behavior::Normal);
    hold_directly(&nodes[0], "z", TTL).await;
    hold_directly(&nodes[2], "z", TTL).await;
    assert!(matches!(
        acquire(redlock, "z", TTL).await,
        Some(Attempt::Busy { .. })
    ));
    settle().await;
    // 4. A TTL too short for any validity: refused before any I/O.
    assert!(
        acquire(redlock, "w", Duration::from_millis(1))
            .await
            .is_none()
    );
}

/// The counters after `run` over three nodes that start normal.
fn counted<F: Future<Output = ()>>(run: impl FnOnce(Vec<Arc<Scripted>>, Redlock) -> F) -> Counters {
    let recorder = DebuggingRecorder::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            lock_redlock::metric::describe();
            let nodes = scripted(&[Behavior::Normal; 3]);
            let redlock = common::memory::redlock(&nodes);
            run(nodes, redlock).await;
        });
    });
    counters(&recorder)
}

#[test]
fn counters_after_a_scripted_scenario() {
    let counters = counted(|nodes, redlock| async move { scenario(&nodes, &redlock).await });
    let expected: Counters = [
        // node 0: granted x and y, refused z; released x and y.
        ("distlock_redlock_node_grants_total{node=0,op=acquire}", 2),
        ("distlock_redlock_node_refusals_total{node=0,op=acquire}", 1),
        ("distlock_redlock_node_grants_total{node=0,op=release}", 2),
        // node 1: granted x and z, timed out on y; released x and z, timed out releasing y
        // (once: y's release waited for its acquire attempt there to time out first).
        ("distlock_redlock_node_grants_total{node=1,op=acquire}", 2),
        ("distlock_redlock_node_timeouts_total{node=1,op=acquire}", 1),
        ("distlock_redlock_node_grants_total{node=1,op=release}", 2),
        ("distlock_redlock_node_timeouts_total{node=1,op=release}", 1),
        // node 2: failed x, granted y, refused z; failed releasing x, released y.
        ("distlock_redlock_node_errors_total{node=2,op=acquire}", 1),
        ("distlock_redlock_node_grants_total{node=2,op=acquire}", 1),
        ("distlock_redlock_node_refusals_total{node=2,op=acquire}", 1),
        ("distlock_redlock_node_errors_total{node=2,op=release}", 1),
        ("distlock_redlock_node_grants_total{node=2,op=release}", 1),
        // the quorum's decisions.
        (
            "distlock_redlock_quorum_total{op=acquire,outcome=acquired}",
            2,
        ),
        ("distlock_redlock_quorum_total{op=acquire,outcome=busy}", 1),
        (
            "distlock_redlock_quorum_total{op=acquire,outcome=invalid}",
            1,
        ),
        (
            "distlock_redlock_quorum_total{op=release,outcome=released}",
            2,
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counters, expected);
}

#[test]
fn a_lagging_nodes_releases_not_waited_for_still_count_as_timeouts() {
    let counters = counted(|nodes, redlock| async move {
        nodes[2].set(Behavior::DelayBefore(Duration::from_secs(3600)));
        for _ in 0..3 {
            let Some(Attempt::Acquired(lease)) = acquire(&redlock, "a", TTL).await else {
                panic!("granted")
            };
            assert!(redlock.release(&lease).await.expect("ok"));
        }
        settle().await;
    });
    // The first release waited for node 2 until its timeout; the other two did not wait
    // (it was lagging), and their calls were abandoned in the background.
    assert_eq!(
        counters.get("distlock_redlock_node_timeouts_total{node=2,op=release}"),
        Some(&3)
    );
}

#[test]
fn nothing_is_recorded_without_a_recorder() {
    // The facade's no-op recorder: a Redlock works with no metrics installed.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let nodes = scripted(&[Behavior::Normal; 3]);
        let redlock = common::memory::redlock(&nodes);
        scenario(&nodes, &redlock).await;
    });
}
