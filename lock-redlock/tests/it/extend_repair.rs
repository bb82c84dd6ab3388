//! Extend repair: a holder renewing over 5 real redis-servers; one node is SIGKILLed and
//! restarted empty. A later renewal puts the lease's key back on that node, with the same
//! token (read with a plain client), and counts it under `op="repair"`; a node where another
//! token holds the key keeps that key; a node in its store grace period (lock-redis `grace`)
//! refuses the repair until the grace has run out.
//!
//! The counters come from a `DebuggingRecorder` installed for this thread only, on a
//! current-thread runtime (real time: the servers are real), so the renewals and the repairs
//! (the watchdog's task, the repair's task) are recorded here.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use lock_core::{Guard, Locker};
use lock_redis::RedisLock;
use lock_redlock::Redlock;
use lock_testkit::KeepData;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::common::servers::{CLIENT_TIMEOUT, Nodes, token_hex};

/// The renewed lease: renewed every second (a third of it).
const LEASE: Duration = Duration::from_secs(3);
const LEASE_MS: i64 = 3_000;

/// Bound on the wait for a repair: many renewals, on a loaded machine.
const POLLS: u32 = 300;
const POLL: Duration = Duration::from_millis(50);

/// Counter totals: a snapshot of the debugging recorder resets its counters, so they are
/// added up here.
struct Counters {
    snapshotter: Snapshotter,
    totals: BTreeMap<String, u64>,
}

impl Counters {
    /// The total of `name{node=node,op=op}`.
    fn get(&mut self, name: &str, node: &str, op: &str) -> u64 {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let DebugValue::Counter(n) = value else {
                continue;
            };
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            *self
                .totals
                .entry(format!("{}{{{}}}", key.name(), labels.join(",")))
                .or_default() += n;
        }
        self.totals
            .get(&format!("{name}{{node={node},op={op}}}"))
            .copied()
            .unwrap_or(0)
    }

    /// The repairs counted so far on each of the five nodes.
    fn repairs(&mut self) -> [u64; 5] {
        std::array::from_fn(|i| {
            self.get(
                "distlock_redlock_node_grants_total",
                &format!("n{i}"),
                "repair",
            )
        })
    }
}

/// Runs `test` on a current-thread runtime with a recorder local to this thread.
fn with_counters<F: Future<Output = ()>>(test: impl FnOnce(Counters) -> F) {
    let recorder = DebuggingRecorder::new();
    let counters = Counters {
        snapshotter: recorder.snapshotter(),
        totals: BTreeMap::new(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    metrics::with_local_recorder(&recorder, || runtime.block_on(test(counters)));
}

/// Waits (bounded) until the nodes in `of` hold `token` under `key`.
async fn wait_held(nodes: &Nodes, of: &[usize], key: &str, token: &str) -> bool {
    for _ in 0..POLLS {
        if nodes.holding(of, key, token).await.len() == of.len() {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    false
}

/// A renewed lease of `name` over all the nodes, held on every one of them.
async fn held_everywhere(nodes: &Nodes, locker: &Locker, name: &str) -> (Guard, String) {
    let guard = locker.lock(name).lease(LEASE).await.expect("granted");
    let token = token_hex(&guard.lease());
    let all: Vec<usize> = (0..nodes.len()).collect();
    assert!(wait_held(nodes, &all, name, &token).await, "held on all 5");
    (guard, token)
}

#[test]
fn a_node_restarted_empty_gets_the_lease_back_at_a_later_renewal() {
    with_counters(|mut counters| async move {
        let mut nodes = Nodes::start(5);
        let locker = Locker::new(nodes.redlock());
        let (guard, token) = held_everywhere(&nodes, &locker, "job").await;
        // On a loaded machine the grant can miss a node (slower than the node timeout) and a
        // renewal repair it before it holds everywhere: only later repairs count here.
        let before = counters.repairs();

        nodes.servers[2]
            .restart(KeepData::Discard)
            .expect("SIGKILL, restart empty");
        assert!(!nodes.exists(2, "job").await, "node 2 lost the key");

        assert!(
            wait_held(&nodes, &[2], "job", &token).await,
            "a renewal put the key back on node 2"
        );
        assert_eq!(
            nodes.get(2, "job").await.as_deref(),
            Some(token.as_str()),
            "the same token"
        );
        let pttl = nodes.pttl(2, "job").await;
        assert!(
            pttl > 0 && pttl <= LEASE_MS,
            "with the lease's TTL: PTTL {pttl}"
        );
        assert!(
            counters.get("distlock_redlock_node_grants_total", "n2", "repair") > before[2],
            "counted as a repair of node 2"
        );
        for i in [0, 1, 3, 4] {
            let node = format!("n{i}");
            assert_eq!(
                counters.get("distlock_redlock_node_grants_total", &node, "repair"),
                before[i],
                "{node} never lost the key"
            );
        }
        assert!(guard.is_held(), "the lease was never lost");

        assert!(guard.release().await.is_ok(), "released");
        let all: Vec<usize> = (0..5).collect();
        assert!(
            nodes.wait_gone(&all, "job").await,
            "the release covers the repaired node too"
        );
    });
}

#[test]
fn a_repair_never_takes_a_key_another_token_holds() {
    with_counters(|mut counters| async move {
        let mut nodes = Nodes::start(5);
        let locker = Locker::new(nodes.redlock());
        let (guard, token) = held_everywhere(&nodes, &locker, "job").await;
        // On a loaded machine the grant itself can miss node 4 (slower than the node timeout)
        // and a renewal repair it before it holds everywhere: only later repairs count here.
        let repaired_before = counters.get("distlock_redlock_node_grants_total", "n4", "repair");

        // Node 4 restarts empty and another client takes the name there (a minority: it
        // gets nothing elsewhere).
        nodes.servers[4]
            .restart(KeepData::Discard)
            .expect("SIGKILL, restart empty");
        let foreign = "another-client-token";
        let set: Option<String> = redis::cmd("SET")
            .arg("job")
            .arg(foreign)
            .arg("NX")
            .arg("PX")
            .arg(60_000)
            .query_async(
                &mut redis::Client::open(nodes.url(4))
                    .expect("url")
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect"),
            )
            .await
            .expect("SET NX");
        assert_eq!(set.as_deref(), Some("OK"), "the node had lost our key");

        // Renewals go on and try to repair node 4: refused there, every time.
        let mut refused = 0;
        for _ in 0..POLLS {
            refused = counters.get("distlock_redlock_node_refusals_total", "n4", "repair");
            if refused >= 2 {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        assert!(refused >= 2, "two renewals tried node 4: {refused}");
        assert_eq!(
            nodes.get(4, "job").await.as_deref(),
            Some(foreign),
            "the other token's key is untouched"
        );
        assert!(nodes.pttl(4, "job").await > LEASE_MS, "and its TTL too");
        assert_eq!(
            counters.get("distlock_redlock_node_grants_total", "n4", "repair"),
            repaired_before,
            "no repair of node 4 while the other token holds it"
        );
        // The four others still hold the lease.
        assert_eq!(
            nodes.holding(&[0, 1, 2, 3], "job", &token).await,
            vec![0, 1, 2, 3]
        );
        assert!(guard.is_held(), "the lease was never lost");
        assert!(guard.release().await.is_ok(), "released on four of five");
        assert_eq!(nodes.get(4, "job").await.as_deref(), Some(foreign));
    });
}

/// A Redlock whose nodes keep a store grace period of `grace` (lock-redis `grace`).
fn redlock_with_grace(nodes: &Nodes, grace: Duration) -> Redlock {
    nodes
        .urls()
        .iter()
        .enumerate()
        .fold(Redlock::builder(), |b, (i, url)| {
            let node = RedisLock::builder()
                .url(url.as_str())
                .connect_timeout(CLIENT_TIMEOUT)
                .command_timeout(CLIENT_TIMEOUT)
                .grace(grace)
                .build()
                .expect("valid node");
            b.named_node(format!("n{i}"), node)
        })
        .build()
        .expect("valid Redlock")
}

#[test]
fn a_node_in_its_grace_period_is_repaired_only_after_it() {
    with_counters(|mut counters| async move {
        let mut nodes = Nodes::start(5);
        // The grace is the fleet's longest lease: this one.
        let locker = Locker::new(redlock_with_grace(&nodes, LEASE));
        let (guard, token) = held_everywhere(&nodes, &locker, "job").await;
        // On a loaded machine the grant can miss a node (slower than the node timeout) and a
        // renewal repair it before it holds everywhere: only later repairs count here.
        let before = counters.repairs();

        nodes.servers[2]
            .restart(KeepData::Discard)
            .expect("SIGKILL, restart empty");
        let restarted = std::time::Instant::now();
        // The renewals reach node 2 and see its new run_id: it grants nothing for the grace,
        // so the repairs are refused.
        let mut refused = 0;
        for _ in 0..POLLS {
            refused = counters.get("distlock_redlock_node_refusals_total", "n2", "repair");
            if refused >= 1 {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        assert!(refused >= 1, "a repair was refused during the grace");
        // Counted from when this client saw the restart, so it ends no earlier than `LEASE`
        // after the restart: a repair seen before then went through the grace.
        assert!(
            wait_held(&nodes, &[2], "job", &token).await,
            "repaired once the grace ran out"
        );
        assert!(
            restarted.elapsed() >= LEASE,
            "repaired {:?} after the restart, within the {LEASE:?} grace",
            restarted.elapsed()
        );
        assert!(
            counters.get("distlock_redlock_node_grants_total", "n2", "repair") > before[2],
            "counted as a repair of node 2"
        );
        assert!(guard.is_held(), "the lease was never lost");
        assert!(guard.release().await.is_ok(), "released");
    });
}
