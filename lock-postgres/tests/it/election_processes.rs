//! Leader election on PostgreSQL (the lease table) across OS processes (`lock_testkit::election_processes`):
//! three candidate processes, one leader at a time by an independent witness, terms strictly
//! increasing; the leader SIGSTOPped past its lease and then SIGKILLed, a new leader within
//! the lease and a second each time, the paused leader's late fenced write rejected and its
//! work cancelled; an observer process that sees every term in order.

use lock_core::Locker;
use lock_testkit::PostgresServer;
use lock_testkit::election_processes::{self as election, Candidates};

use crate::common;

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    let lock = common::unmigrated_at(election::store().remove(0));
    election::candidate(Locker::new(lock)).await;
}

/// The candidates on `server`, its lease table made once before they start.
async fn candidates(server: &PostgresServer) -> Candidates {
    drop(common::lock(server).await);
    Candidates::new(lock_testkit::child_test!(candidate), [server.url()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_terms_increase() {
    let server = common::server();
    candidates(&server).await.one_leader_at_a_time().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_or_killed_leader_is_replaced_and_fenced_off() {
    let server = common::server();
    candidates(&server).await.paused_and_killed_leaders().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_process_sees_every_term_in_order() {
    let server = common::server();
    candidates(&server).await.observer_sees_every_term().await;
}
