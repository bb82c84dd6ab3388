//! Leader election on etcd across OS processes (`lock_testkit::election_processes`): the
//! term is the grant's fencing token (the key's revision). Three candidate processes, one
//! leader at a time by an independent witness, terms strictly increasing; the leader
//! SIGSTOPped past its lease and then SIGKILLed, a new leader within the lease and a second
//! each time, the paused leader's late fenced write rejected and its work cancelled.
//! A fourth process observing sees every term in order.

use lock_core::Locker;
use lock_testkit::election_processes::{self as election, Candidates};

use crate::common;

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    let lock = common::lock_at(election::store());
    election::candidate(Locker::new(lock)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_paused_or_killed_leader_is_replaced() {
    let cluster = common::one_member();
    let candidates = Candidates::new(lock_testkit::child_test!(candidate), cluster.endpoints());
    candidates.one_leader_at_a_time().await;
    candidates.paused_and_killed_leaders().await;
}

/// A fourth process observes while three candidates lead in turn, each SIGKILLed once it has
/// led: it sees every term in order, read from the holder descriptions (`\0note/` beside the
/// leader key, the term its revision).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_process_sees_every_term_in_order() {
    let cluster = common::one_member();
    Candidates::new(lock_testkit::child_test!(candidate), cluster.endpoints())
        .observer_sees_every_term()
        .await;
}
