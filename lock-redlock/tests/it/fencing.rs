//! The Redlock fencing token on RedisLock nodes: the largest of the granting nodes' tokens,
//! which are `max(server µs, counter + 1)`. With the nodes' clocks in step (here: one machine,
//! one clock), it strictly increases across successive grants whatever quorum grants them:
//! through release, expiry, a node restarted empty, and a node down.

use std::time::Duration;

use lock_core::{Guard, Locker};
use lock_testkit::KeepData;

use crate::common::servers::Nodes;

async fn grant(locker: &Locker, ttl: Duration) -> Guard {
    locker
        .lock("fenced")
        .fixed_ttl(ttl)
        .wait(Duration::from_secs(5))
        .await
        .expect("granted")
}

#[tokio::test]
async fn tokens_strictly_increase_across_grants_and_node_faults() {
    let mut nodes = Nodes::start(3);
    let locker = Locker::new(nodes.redlock());
    let ttl = Duration::from_secs(10);
    let mut last = 0;
    let mut check = |token: u64, what: &str| {
        assert!(token > last, "{what}: {token} after {last}");
        last = token;
    };

    let g = grant(&locker, ttl).await;
    // The token is one of the nodes' tokens (the largest among the grants counted).
    let mut fences = Vec::new();
    for i in 0..3 {
        fences.push(nodes.fence(i, "fenced").await.unwrap_or(0));
    }
    assert!(fences.contains(&g.fencing_token()), "{fences:?}");
    check(g.fencing_token(), "first");
    g.release().await.expect("ok");

    // Leaked with a short TTL: it expires instead of being released.
    let leaked = grant(&locker, Duration::from_millis(300)).await.leak();
    check(leaked.fencing_token(), "after a release");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let g = grant(&locker, ttl).await;
    check(g.fencing_token(), "after an expiry");
    g.release().await.expect("ok");

    nodes.servers[0].restart(KeepData::Discard).expect("empty");
    let g = grant(&locker, ttl).await;
    check(g.fencing_token(), "after node 0 restarted empty");
    g.release().await.expect("ok");

    nodes.servers[1].stop();
    for round in 0..20 {
        let g = grant(&locker, ttl).await;
        check(g.fencing_token(), &format!("node 1 down, round {round}"));
        g.release().await.expect("ok");
    }
    nodes.servers[1].start_again().expect("back");
    // Rotate which node is down, so successive quorums differ.
    for round in 0..9 {
        let down = round % 3;
        nodes.servers[down].stop();
        let g = grant(&locker, ttl).await;
        check(g.fencing_token(), &format!("node {down} down"));
        g.release().await.expect("ok");
        nodes.servers[down].start_again().expect("back");
    }
}
