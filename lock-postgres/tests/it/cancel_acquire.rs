//! A dropped acquire leaves no lease behind: the locker releases the token of an attempt that
//! may have reached the server, in the background.

use crate::common;

use std::time::Duration;

use lock_core::backend::{Attempt, Lock};
use lock_core::{Locker, Token};

/// Polls (bounded) until no lease is held.
async fn until_none_held(client: &tokio_postgres::Client) -> i64 {
    let mut held = common::held(client).await;
    for _ in 0..100 {
        if held == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        held = common::held(client).await;
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_dropped_while_its_statement_runs_leaves_no_lease() {
    let server = common::server();
    let lock = common::lock(&server).await;
    // Make the row exist, then hold it in a transaction so the acquire statement blocks.
    let Attempt::Acquired(first) = lock
        .try_acquire(
            "job",
            Token::generate().expect("token"),
            Duration::from_secs(30),
        )
        .await
        .expect("acquire")
    else {
        panic!("busy");
    };
    assert!(lock.release(&first).await.expect("release"));
    let locker = Locker::new(lock);
    let mut blocker = common::client(&server.url()).await;
    let tx = blocker.transaction().await.expect("begin");
    tx.execute(
        "SELECT 1 FROM distlock_leases WHERE name = 'job' FOR UPDATE",
        &[],
    )
    .await
    .expect("lock the row");

    // The statement is sent and blocks; the caller gives up and drops the acquire.
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        locker.lock("job").lease(Duration::from_secs(60)).acquire(),
    )
    .await;
    assert!(dropped.is_err(), "the acquire should have been blocked");

    // Unblocked, the dropped statement grants the lease, and the background release frees it.
    tx.rollback().await.expect("rollback");
    let client = common::client(&server.url()).await;
    assert_eq!(
        until_none_held(&client).await,
        0,
        "the dropped acquire's lease stayed"
    );
    let guard = locker
        .lock("job")
        .try_acquire()
        .await
        .expect("try")
        .expect("free again");
    guard.release().await.expect("ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_dropped_at_any_point_leave_no_lease() {
    let server = common::server();
    let locker = Locker::new(common::lock(&server).await);
    for step in 0..40u64 {
        let name = format!("job-{step}");
        let _ = tokio::time::timeout(
            Duration::from_micros(step * 150),
            locker.lock(name).lease(Duration::from_secs(60)).acquire(),
        )
        .await;
    }
    let client = common::client(&server.url()).await;
    assert_eq!(
        until_none_held(&client).await,
        0,
        "a dropped acquire's lease stayed"
    );
}
