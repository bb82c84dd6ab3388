//! Two of five nodes hang (SIGSTOP): acquire and release go on with the other three, without
//! waiting for the hung ones beyond the per-node timeout; once resumed, the hung nodes keep
//! nothing of ours.

use std::time::{Duration, Instant};

use lock_core::Locker;

use crate::common::servers::{FAST, Nodes, Paused, token_hex};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_five_paused_still_granted() {
    let nodes = Nodes::start(5);
    let redlock = nodes.redlock();
    let locker = Locker::new(redlock.clone());
    // Warm up: every node's connection is made before the pause, so requests to the paused
    // nodes queue on those connections behind each other.
    let guard = locker.lock("job").await.expect("all up");
    guard.release().await.expect("ok");
    assert!(nodes.wait_gone(&[0, 1, 2, 3, 4], "job").await);

    let ttl = Duration::from_secs(30);
    assert_eq!(redlock.node_timeout(ttl), Duration::from_millis(500));
    {
        let _p3 = Paused::pause(&nodes.servers[3]);
        let _p4 = Paused::pause(&nodes.servers[4]);
        for round in 0..5 {
            let started = Instant::now();
            let guard = locker
                .lock("job")
                .fixed_ttl(ttl)
                .wait(Duration::ZERO)
                .await
                .expect("granted by three of five");
            assert!(
                started.elapsed() < FAST,
                "round {round}: {:?}",
                started.elapsed()
            );
            let token = token_hex(&guard.lease());
            assert_eq!(nodes.holding(&[0, 1, 2], "job", &token).await, [0, 1, 2]);
            assert!(guard.remaining() > ttl / 2);
            guard.release().await.expect("three of five released");
        }
        // Resumed here (also if an assertion above failed).
    }
    // Every request the paused nodes had queued (acquires, then releases, on one connection
    // each) is now applied in order: nothing of ours is left.
    assert!(
        nodes.wait_gone(&[0, 1, 2, 3, 4], "job").await,
        "the resumed nodes hold no key of ours"
    );
    let guard = locker.lock("job").await.expect("all five again");
    guard.release().await.expect("ok");
}
