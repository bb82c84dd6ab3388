//! Leader election on Redis across OS processes (`lock_testkit::election_processes`):
//! three candidate processes, one leader at a time by an independent witness, terms strictly
//! increasing; the leader SIGSTOPped past its lease and then SIGKILLed, a new leader within
//! the lease and a second each time, the paused leader's late fenced write rejected and its
//! work cancelled; an observer process that sees every term in order. On one server, on a
//! 3-master cluster and on Valkey.

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::election_processes::{self as election, Candidates};

use crate::common;

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    let mut store = election::store();
    let builder = RedisLock::builder();
    // Several URLs: a cluster's nodes.
    let builder = if store.len() > 1 {
        builder.cluster_urls(store)
    } else {
        builder.url(store.remove(0))
    };
    let lock = builder.build().expect("lock");
    election::candidate(Locker::new(lock)).await;
}

/// The candidates at `urls`: one server's, or a cluster's nodes.
fn candidates(urls: impl IntoIterator<Item = String>) -> Candidates {
    Candidates::new(lock_testkit::child_test!(candidate), urls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_terms_increase() {
    let server = common::server();
    candidates([server.url()]).one_leader_at_a_time().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_or_killed_leader_is_replaced_and_fenced_off() {
    let server = common::server();
    candidates([server.url()]).paused_and_killed_leaders().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_one_leader_at_a_time_and_a_paused_or_killed_leader_is_replaced() {
    let cluster = lock_testkit::RedisCluster::start().expect("cluster");
    let candidates = candidates(cluster.urls());
    candidates.one_leader_at_a_time().await;
    candidates.paused_and_killed_leaders().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_valkey_a_paused_or_killed_leader_is_replaced_and_fenced_off() {
    let server = common::valkey();
    candidates([server.url()]).paused_and_killed_leaders().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_process_sees_every_term_in_order() {
    let server = common::server();
    candidates([server.url()]).observer_sees_every_term().await;
}
