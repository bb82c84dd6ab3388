//! Latches and barriers on Redis across OS processes (`lock_testkit::coordination_processes`):
//! a party SIGKILLed in another process breaks the latch, and is counted out of the barrier,
//! within its lease of the kill.

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::coordination_processes::{self as coordination, Participants};

use crate::common;

#[tokio::test]
#[ignore = "a participant process of the coordination tests"]
async fn participant() {
    let url = coordination::store().remove(0);
    let lock = RedisLock::builder().url(url).build().expect("lock");
    coordination::participant(Locker::new(lock)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_party_breaks_the_latch_and_a_killed_member_is_counted_out() {
    let server = common::server();
    let participants = Participants::new(lock_testkit::child_test!(participant), [server.url()]);
    let locker = Locker::new(
        RedisLock::builder()
            .url(server.url())
            .build()
            .expect("lock"),
    );
    let latch = participants.a_killed_party_breaks_the_latch(&locker).await;
    let barrier = participants.a_killed_member_is_counted_out(&locker).await;
    println!("redis: latch broken {latch:?}, barrier left {barrier:?} after the kill");
}
