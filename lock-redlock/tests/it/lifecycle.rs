//! Acquire, extend and release over N = 1, 3 and 5 real redis-servers: the same token on every
//! node, the TTL applied everywhere, the fencing token the largest of the nodes', and nothing
//! left once released.

use std::time::Duration;

use lock_core::Locker;

use crate::common::servers::{Nodes, token_hex};

const TTL: Duration = Duration::from_secs(10);

async fn lifecycle(n: usize) {
    let nodes = Nodes::start(n);
    let redlock = nodes.redlock();
    assert_eq!(redlock.quorum(), n / 2 + 1);
    let locker = Locker::new(redlock.clone());
    let all: Vec<usize> = (0..n).collect();

    let mut guard = locker
        .lock("order:42")
        .fixed_ttl(TTL)
        .wait(Duration::from_secs(5))
        .await
        .expect("granted");
    let token = token_hex(&guard.lease());
    // The quorum answered; the rest are on their way: give them a moment (bounded).
    for _ in 0..500 {
        if nodes.holding(&all, "order:42", &token).await.len() == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        nodes.holding(&all, "order:42", &token).await,
        all,
        "N = {n}: every node holds our token"
    );
    let mut fences = Vec::new();
    for i in 0..n {
        let pttl = nodes.pttl(i, "order:42").await;
        assert!(pttl > 0 && pttl <= 10_000, "PTTL {pttl}");
        fences.push(nodes.fence(i, "order:42").await.expect("a fencing counter"));
    }
    assert!(
        fences.contains(&guard.fencing_token()),
        "the lease's token is one of the nodes': {} in {fences:?}",
        guard.fencing_token()
    );
    assert!(guard.fencing_token() >= *fences.iter().min().expect("n > 0"));
    assert!(guard.remaining() <= TTL - redlock.drift(TTL));

    // Held: another try is refused.
    assert!(
        locker
            .lock("order:42")
            .try_acquire()
            .await
            .expect("ok")
            .is_none(),
        "N = {n}: exclusive"
    );

    // Extend to a minute: every node's TTL grows.
    guard
        .extend(Duration::from_secs(60))
        .await
        .expect("extended");
    for i in 0..n {
        assert!(
            nodes.pttl(i, "order:42").await > 10_000,
            "node {i} extended"
        );
    }

    guard.release().await.expect("ok");
    assert!(
        nodes.wait_gone(&all, "order:42").await,
        "released everywhere"
    );
    // And free again.
    let again = locker.lock("order:42").try_acquire().await.expect("ok");
    again.expect("free").release().await.expect("ok");
}

#[tokio::test]
async fn one_node() {
    lifecycle(1).await;
}

#[tokio::test]
async fn three_nodes() {
    lifecycle(3).await;
}

#[tokio::test]
async fn five_nodes() {
    lifecycle(5).await;
}
