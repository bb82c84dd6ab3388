//! Leader election on object storage (SeaweedFS) across OS processes
//! (`lock_testkit::election_processes`): three candidate processes, one leader at a time by an
//! independent witness, terms strictly increasing; the leader SIGSTOPped past its lease, the
//! next SIGKILLed and the one after sent SIGTERM (its run tied to `shutdown()`): a new leader
//! within the lease and a second the first two times, at once the third.

use lock_core::Locker;
use lock_testkit::election_processes::{self as election, Candidates};

use crate::common;

#[tokio::test]
#[ignore = "a candidate process of the election tests"]
async fn candidate() {
    // The store names the S3 endpoint, then the lock's URL.
    let store = election::store();
    let lock = common::lock_at(&store[0], &store[1]);
    election::candidate(Locker::new(lock)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_a_paused_killed_or_stopped_leader_is_replaced() {
    let server = common::shared();
    let candidates = Candidates::new(
        lock_testkit::child_test!(candidate),
        [server.endpoint(), server.url("elections")],
    );
    candidates.one_leader_at_a_time().await;
    candidates.paused_and_killed_leaders().await;
}
