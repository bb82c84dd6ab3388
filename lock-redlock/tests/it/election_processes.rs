//! Leader election on a Redlock of three Redis masters across OS processes
//! (`lock_testkit::election_processes`): the term is the Redlock grant's fencing token. Three
//! candidate processes, one leader at a time by an independent witness, terms strictly
//! increasing; the leader SIGSTOPped past its lease and then SIGKILLed, a new leader within
//! the lease and a second each time, the paused leader's late fenced write rejected and its
//! work cancelled.

use lock_core::Locker;
use lock_testkit::election_processes as election;

use crate::common::servers::{Nodes, redlock_over};

/// The masters' URLs, comma separated.
const URLS_VAR: &str = "DISTLOCK_ELECTION_REDLOCK_URLS";

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    let urls: Vec<String> = std::env::var(URLS_VAR)
        .expect("the masters' URLs")
        .split(',')
        .map(str::to_owned)
        .collect();
    election::candidate(Locker::new(redlock_over(&urls, |b| b))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_paused_or_killed_leader_is_replaced() {
    let nodes = Nodes::start(3);
    let env = [(URLS_VAR, nodes.urls().join(","))];
    let child = lock_testkit::child_test!(candidate);
    election::one_leader_at_a_time(&child, &env)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let failovers = election::paused_and_killed_leaders(&child, &env)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{failovers:?}");
}
