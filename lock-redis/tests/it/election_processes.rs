//! Leader election on Redis across OS processes (`lock_testkit::election_processes`):
//! three candidate processes, one leader at a time by an independent witness, terms strictly
//! increasing; the leader SIGSTOPped past its lease and then SIGKILLed, a new leader within
//! the lease and a second each time, the paused leader's late fenced write rejected and its
//! work cancelled; an observer process that sees every term in order. On one server, on a
//! 3-master cluster and on Valkey.

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::election_processes as election;

use crate::common;

/// The candidates' Redis: one URL, or a cluster's, comma separated.
const URL_VAR: &str = "DISTLOCK_ELECTION_REDIS_URL";

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    let urls = std::env::var(URL_VAR).expect("the server's URL");
    let builder = RedisLock::builder();
    // Several URLs, comma separated: a cluster's nodes.
    let builder = if urls.contains(',') {
        builder.cluster_urls(urls.split(',').map(str::to_owned))
    } else {
        builder.url(urls)
    };
    let lock = builder.build().expect("lock");
    election::candidate(Locker::new(lock)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_terms_increase() {
    let server = common::server();
    election::one_leader_at_a_time(
        &lock_testkit::child_test!(candidate),
        &[(URL_VAR, server.url())],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_or_killed_leader_is_replaced_and_fenced_off() {
    let server = common::server();
    let failovers = election::paused_and_killed_leaders(
        &lock_testkit::child_test!(candidate),
        &[(URL_VAR, server.url())],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{failovers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_one_leader_at_a_time_and_a_paused_or_killed_leader_is_replaced() {
    let cluster = lock_testkit::RedisCluster::start().expect("cluster");
    let env = [(URL_VAR, cluster.urls().join(","))];
    let child = lock_testkit::child_test!(candidate);
    election::one_leader_at_a_time(&child, &env)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let failovers = election::paused_and_killed_leaders(&child, &env)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{failovers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_valkey_a_paused_or_killed_leader_is_replaced_and_fenced_off() {
    let server = common::valkey();
    let failovers = election::paused_and_killed_leaders(
        &lock_testkit::child_test!(candidate),
        &[(URL_VAR, server.url())],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{failovers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_process_sees_every_term_in_order() {
    let server = common::server();
    election::observer_sees_every_term(
        &lock_testkit::child_test!(candidate),
        &[(URL_VAR, server.url())],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}
