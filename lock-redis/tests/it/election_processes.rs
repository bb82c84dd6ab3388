//! Leader election on one Redis across OS processes (`lock_testkit::election_processes`):
//! three candidate processes, one leader at a time by an independent witness, terms strictly
//! increasing; the leader SIGSTOPped past its lease and then SIGKILLed, a new leader within
//! the lease and a second each time, the paused leader's late fenced write rejected and its
//! work cancelled.

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::election_processes as election;

use crate::common;

/// The candidates' Redis.
const URL_VAR: &str = "DISTLOCK_ELECTION_REDIS_URL";

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    let url = std::env::var(URL_VAR).expect("the server's URL");
    let lock = RedisLock::builder().url(url).build().expect("lock");
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
