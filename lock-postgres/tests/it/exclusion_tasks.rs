//! Tasks behind four lockers (four `PostgresLock`s, as four processes would have) take turns:
//! a read-modify-write counter that yields between its read and its write stays exact.

use crate::common;

use lock_core::Locker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_updated_under_the_lock_stays_exact() {
    let server = common::server();
    let mut lockers = Vec::new();
    for _ in 0..4 {
        lockers.push(Locker::new(common::lock(&server).await));
    }
    common::counter_stays_exact(lockers, 15, |_| {}).await;
    let client = common::client(&server.url()).await;
    assert_eq!(common::held(&client).await, 0, "a lease was left behind");
}
