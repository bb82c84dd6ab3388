//! Latches and barriers on etcd across OS processes (`lock_testkit::coordination_processes`):
//! a party SIGKILLed in another process breaks the latch, and is counted out of the barrier,
//! within its lease of the kill.

use lock_core::Locker;
use lock_testkit::coordination_processes::{self as coordination, Participants};

use crate::common;

#[tokio::test]
#[ignore = "a participant process of the coordination tests"]
async fn participant() {
    let lock = common::lock_at(coordination::store());
    coordination::participant(Locker::new(lock)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_party_breaks_the_latch_and_a_killed_member_is_counted_out() {
    let cluster = common::one_member();
    let locker = Locker::new(common::lock_at(cluster.endpoints()));
    let participants =
        Participants::new(lock_testkit::child_test!(participant), cluster.endpoints());
    let latch = participants.a_killed_party_breaks_the_latch(&locker).await;
    let barrier = participants.a_killed_member_is_counted_out(&locker).await;
    println!("etcd: latch broken {latch:?}, barrier left {barrier:?} after the kill");
}
