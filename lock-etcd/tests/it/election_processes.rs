//! Leader election on etcd across OS processes (`lock_testkit::election_processes`): the
//! term is the grant's fencing token (the key's revision). Three candidate processes, one
//! leader at a time by an independent witness, terms strictly increasing; the leader
//! SIGSTOPped past its lease and then SIGKILLed, a new leader within the lease and a second
//! each time, the paused leader's late fenced write rejected and its work cancelled.
//! A fourth process observing sees every term in order.

use std::time::Duration;

use lock_core::Locker;
use lock_etcd::EtcdLock;
use lock_testkit::election_processes as election;

use crate::common;

/// The members' endpoints, comma separated.
const ENDPOINTS_VAR: &str = "DISTLOCK_ELECTION_ETCD_ENDPOINTS";

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    let endpoints: Vec<String> = std::env::var(ENDPOINTS_VAR)
        .expect("the endpoints")
        .split(',')
        .map(str::to_owned)
        .collect();
    let lock = EtcdLock::builder()
        .endpoints(endpoints)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid endpoints");
    election::candidate(Locker::new(lock)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_paused_or_killed_leader_is_replaced() {
    let cluster = common::one_member();
    let env = [(ENDPOINTS_VAR, cluster.endpoints().join(","))];
    let child = lock_testkit::child_test!(candidate);
    election::one_leader_at_a_time(&child, &env)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let failovers = election::paused_and_killed_leaders(&child, &env)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{failovers:?}");
}

/// A fourth process observes while three candidates lead in turn, each SIGKILLed once it has
/// led: it sees every term in order, read from the holder descriptions (`\0note/` beside the
/// leader key, the term its revision).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_process_sees_every_term_in_order() {
    let cluster = common::one_member();
    election::observer_sees_every_term(
        &lock_testkit::child_test!(candidate),
        &[(ENDPOINTS_VAR, cluster.endpoints().join(","))],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}
