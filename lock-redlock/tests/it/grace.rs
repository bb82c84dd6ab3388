//! The store grace period on Redlock nodes (lock-redis `RedisLockBuilder::grace`): a node that
//! restarted empty answers busy to every client that saw its new `run_id` until the grace has
//! run out, so it does not vote — antirez's delayed restart, without keeping the node down.
//! The same over several processes and cycles is the torture suite's `redlock-restart-empty`.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_redlock::Redlock;
use lock_testkit::KeepData;

use crate::common::servers::{CLIENT_TIMEOUT, Nodes};

const LEASE: Duration = Duration::from_secs(30);

/// A Redlock whose nodes keep a grace of the fleet's longest lease.
fn redlock(nodes: &Nodes) -> Redlock {
    nodes
        .urls()
        .iter()
        .enumerate()
        .fold(Redlock::builder(), |b, (i, url)| {
            let node = RedisLock::builder()
                .url(url.as_str())
                .connect_timeout(CLIENT_TIMEOUT)
                .command_timeout(CLIENT_TIMEOUT)
                .grace(LEASE)
                .build()
                .expect("valid node");
            b.named_node(format!("n{i}"), node)
        })
        .build()
        .expect("valid Redlock")
}

#[tokio::test]
async fn a_node_restarted_empty_does_not_vote_during_its_grace() {
    // The hazard of `node_restarted_empty`'s bare-quorum test: A holds {0, 1} (node 2 is down),
    // node 1 comes back empty at once, node 2 returns. B saw node 1 before the restart, so
    // node 1 is in its grace period for B: {1, 2} is no quorum.
    let mut nodes = Nodes::start(3);
    let client_a = Locker::new(redlock(&nodes));
    let client_b = Locker::new(redlock(&nodes));
    nodes.servers[2].stop();
    let a = client_a
        .lock("job")
        .fixed_ttl(LEASE)
        .await
        .expect("granted by {0, 1}");
    let busy = client_b.lock("job").fixed_ttl(LEASE).try_acquire().await;
    assert!(matches!(busy, Ok(None) | Err(_)), "A holds it: {busy:?}");

    nodes.servers[1]
        .restart(KeepData::Discard)
        .expect("restart empty");
    nodes.servers[2].start_again().expect("back");
    let b = client_b
        .lock("job")
        .fixed_ttl(LEASE)
        .wait(Duration::from_secs(2))
        .await;
    assert!(b.is_err(), "node 1 voted during its grace: {b:?}");
    assert!(!a.lease().is_expired(), "A still holds a valid lease");
}
