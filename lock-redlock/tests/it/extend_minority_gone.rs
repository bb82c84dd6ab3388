//! Extend with a minority of nodes gone: still extended on the rest; with a majority gone, a
//! quorum error and the lease's validity left where it was.

use std::time::Duration;

use lock_core::{Locker, Op};

use crate::common::memory::quorum_error;
use crate::common::servers::Nodes;

#[tokio::test]
async fn extend_with_two_of_five_gone_then_three() {
    let mut nodes = Nodes::start(5);
    let locker = Locker::new(nodes.redlock());
    let mut guard = locker
        .lock("job")
        .fixed_ttl(Duration::from_secs(5))
        .await
        .expect("granted");
    nodes.servers[3].stop();
    nodes.servers[4].stop();

    let before = guard.valid_until();
    guard
        .extend(Duration::from_secs(60))
        .await
        .expect("three of five extend");
    assert!(guard.valid_until() > before + Duration::from_secs(30));
    for i in 0..3 {
        let pttl = nodes.pttl(i, "job").await;
        assert!(pttl > 30_000, "node {i}: PTTL {pttl}");
    }

    nodes.servers[2].stop();
    let before = guard.valid_until();
    let error = guard
        .extend(Duration::from_secs(120))
        .await
        .expect_err("two of five");
    assert!(error.is_retryable(), "{error:?}");
    let q = quorum_error(&error).expect("QuorumNotReached");
    assert_eq!((q.op, q.required, q.failed), (Op::Extend, 3, 3), "{q}");
    assert_eq!(guard.valid_until(), before, "validity not moved");
    // Release reaches two of five: not decided, an error; the keys expire with their TTL.
    assert!(guard.release().await.is_err());
}
