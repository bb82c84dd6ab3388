//! One node killed: the lock is still granted, extended and released by the others.

use std::time::{Duration, Instant};

use lock_core::Locker;

use crate::common::servers::{FAST, Nodes, token_hex};

#[tokio::test]
async fn one_node_of_three_killed_the_lock_carries_on() {
    let mut nodes = Nodes::start(3);
    let locker = Locker::new(nodes.redlock());
    // Warm up: every node connected and working.
    let guard = locker.lock("job").await.expect("all up");
    guard.release().await.expect("ok");
    // A release answers once a quorum has; the last node's may still be on its way.
    assert!(nodes.wait_gone(&[0, 1, 2], "job").await);

    nodes.servers[1].stop();
    let started = Instant::now();
    let mut guard = locker
        .lock("job")
        .fixed_ttl(Duration::from_secs(10))
        .wait(Duration::ZERO)
        .await
        .expect("granted by the two left");
    assert!(started.elapsed() < FAST, "took {:?}", started.elapsed());
    let token = token_hex(&guard.lease());
    assert_eq!(nodes.holding(&[0, 2], "job", &token).await, [0, 2]);
    assert!(
        locker
            .lock("job")
            .try_acquire()
            .await
            .expect("ok")
            .is_none()
    );
    guard
        .extend(Duration::from_secs(20))
        .await
        .expect("2 of 3 extend");
    guard.release().await.expect("2 of 3 release");
    assert!(nodes.wait_gone(&[0, 2], "job").await);

    // Back (empty, as after a crash without persistence): it takes part again.
    nodes.servers[1].start_again().expect("restart");
    let guard = locker
        .lock("job")
        .wait(Duration::from_secs(5))
        .await
        .expect("granted");
    let token = token_hex(&guard.lease());
    for _ in 0..500 {
        if nodes.holding(&[0, 1, 2], "job", &token).await.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(nodes.holding(&[0, 1, 2], "job", &token).await, [0, 1, 2]);
    guard.release().await.expect("ok");
}

#[tokio::test]
async fn one_node_of_five_killed_the_lock_carries_on() {
    let mut nodes = Nodes::start(5);
    let locker = Locker::new(nodes.redlock());
    nodes.servers[4].stop();
    for _ in 0..20 {
        let guard = locker
            .lock("job")
            .wait(Duration::from_secs(5))
            .await
            .expect("granted by four of five");
        guard.release().await.expect("ok");
    }
    assert!(nodes.wait_gone(&[0, 1, 2, 3], "job").await);
}
