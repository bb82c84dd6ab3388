//! Leader election on a Redlock of three Redis masters across OS processes
//! (`lock_testkit::election_processes`): the term is the Redlock grant's fencing token. Three
//! candidate processes, one leader at a time by an independent witness, terms strictly
//! increasing; the leader SIGSTOPped past its lease and then SIGKILLed, a new leader within
//! the lease and a second each time, the paused leader's late fenced write rejected and its
//! work cancelled; an observer process (`Election::observe` over the Redlock's quorum
//! `describe_holder`) that sees every term, in order, none twice.

use lock_core::Locker;
use lock_testkit::election_processes::{self as election, Candidates};

use crate::common::servers::{Nodes, redlock_over};

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    let masters = election::store();
    election::candidate(Locker::new(redlock_over(&masters, |b| b))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_paused_or_killed_leader_is_replaced() {
    let nodes = Nodes::start(3);
    let candidates = Candidates::new(lock_testkit::child_test!(candidate), nodes.urls());
    candidates.one_leader_at_a_time().await;
    candidates.paused_and_killed_leaders().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_process_sees_every_term_in_order() {
    let nodes = Nodes::start(3);
    Candidates::new(lock_testkit::child_test!(candidate), nodes.urls())
        .observer_sees_every_term()
        .await;
}
