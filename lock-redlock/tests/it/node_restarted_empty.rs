//! A node restarted empty (no persistence) while a lock is held. What happens, and the rule
//! that keeps Redlock safe: a crashed node stays down for longer than the longest TTL before it
//! rejoins (or runs with `appendfsync always`). See "Operating it" in the crate docs.

use std::time::Duration;

use lock_core::Locker;
use lock_testkit::KeepData;

use crate::common::servers::{Nodes, token_hex};

/// Waits (bounded) until `n` nodes hold the guard's token.
async fn wait_held(nodes: &Nodes, of: &[usize], key: &str, token: &str, n: usize) {
    for _ in 0..500 {
        if nodes.holding(of, key, token).await.len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{n} nodes never held the key");
}

#[tokio::test]
async fn held_on_every_node_one_restart_changes_nothing() {
    let mut nodes = Nodes::start(3);
    let client_a = Locker::new(nodes.redlock());
    let client_b = Locker::new(nodes.redlock());
    let a = client_a
        .lock("job")
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("granted");
    wait_held(&nodes, &[0, 1, 2], "job", &token_hex(&a.lease()), 3).await;

    nodes.servers[2]
        .restart(KeepData::Discard)
        .expect("restart empty");
    assert!(!nodes.exists(2, "job").await, "node 2 lost the key");
    // Two of three still hold A's key: B is refused.
    assert!(
        client_b
            .lock("job")
            .try_acquire()
            .await
            .expect("ok")
            .is_none(),
        "still exclusive"
    );
    a.release().await.expect("two of three released");
}

#[tokio::test]
async fn held_on_a_bare_quorum_an_immediate_restart_breaks_exclusion() {
    // The hazard the delayed-restart rule exists for, shown: A holds the lock on exactly a
    // quorum ({0, 1}; node 2 was down), node 1 crashes and comes back at once, empty; then B
    // gets {1, 2}. Both leases are valid at the same time.
    let mut nodes = Nodes::start(3);
    let client_a = Locker::new(nodes.redlock());
    let client_b = Locker::new(nodes.redlock());
    nodes.servers[2].stop();
    let a = client_a
        .lock("job")
        .fixed_ttl(Duration::from_secs(30))
        .await
        .expect("granted by {0, 1}");
    nodes.servers[1]
        .restart(KeepData::Discard)
        .expect("restart empty");
    nodes.servers[2].start_again().expect("back");
    let b = client_b
        .lock("job")
        .fixed_ttl(Duration::from_secs(30))
        .wait(Duration::from_secs(5))
        .await
        .expect("B is granted by {1, 2}");
    assert!(
        !a.lease().is_expired() && !b.lease().is_expired(),
        "two valid leases at once: exclusion broke, as documented"
    );
    // What still holds: B's fencing token is larger than A's (node 1 restarted empty issues a
    // token from its clock, RedisLock's fallback), so a resource that checks fencing tokens
    // rejects A's writes once it has seen B's.
    assert!(
        b.fencing_token() > a.fencing_token(),
        "{} > {}",
        b.fencing_token(),
        a.fencing_token()
    );
    b.release().await.expect("ok");
    // Only node 0 still holds A's key: A's release cannot reach a quorum. (It is `NotOwned`
    // or, if A's connection to the restarted node 1 fails on first use, a quorum error.)
    assert!(a.release().await.is_err());
}

#[tokio::test]
async fn a_delayed_restart_keeps_exclusion() {
    // Same start, but node 1 stays down for longer than the TTL before rejoining: by the time
    // B can get a quorum, A's lease has expired.
    let ttl = Duration::from_millis(1_500);
    let mut nodes = Nodes::start(3);
    let client_a = Locker::new(nodes.redlock());
    let client_b = Locker::new(nodes.redlock());
    nodes.servers[2].stop();
    let a = client_a
        .lock("job")
        .fixed_ttl(ttl)
        .await
        .expect("granted by {0, 1}");
    nodes.servers[1].stop(); // crashed
    nodes.servers[2].start_again().expect("back"); // was down before A: holds nothing
    // While node 1 is out: {0} holds A's key, {2} alone is no quorum.
    assert!(
        client_b
            .lock("job")
            .fixed_ttl(ttl)
            .wait(Duration::ZERO)
            .await
            .is_err(),
        "no quorum without node 1"
    );
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    nodes.servers[1]
        .restart(KeepData::Discard)
        .expect("rejoin empty");
    let b = client_b
        .lock("job")
        .fixed_ttl(ttl)
        .wait(Duration::from_secs(5))
        .await
        .expect("granted after the delay");
    assert!(a.lease().is_expired(), "A's lease ended before B's began");
    b.release().await.expect("ok");
}
