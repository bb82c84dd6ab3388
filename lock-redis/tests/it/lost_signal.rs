//! Redis unreachable for longer than the lease's validity: `lost()` fires and `run` cancels the
//! work with `LockError::Lost`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lock_core::{LockError, Locker};
use lock_redis::RedisLock;

use crate::common::{self, server};

#[tokio::test]
async fn run_is_cancelled_when_redis_is_gone_past_the_lease() {
    let mut server = server();
    let lock = RedisLock::builder()
        .url(server.url())
        .connect_timeout(Duration::from_millis(200))
        .command_timeout(Duration::from_millis(200))
        // The restart is the fault that ends the lease; the grace is `grace.rs`'s subject.
        .grace(Duration::ZERO)
        .build()
        .expect("url");
    let locker = Locker::builder(lock)
        .lease(Duration::from_millis(600))
        .build();
    let finished = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&finished);
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let work = tokio::spawn({
        let locker = locker.clone();
        async move {
            locker
                .lock("job")
                .run(|lease| async move {
                    let _ = started_tx.send(lease.fencing_token());
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    flag.store(true, Ordering::SeqCst);
                })
                .await
        }
    });
    started_rx.await.expect("the work started under the lock");
    server.stop();
    let stopped = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .expect("run returned")
        .expect("no panic");
    assert!(
        matches!(outcome, Err(LockError::Lost { ref name }) if name == "job"),
        "{outcome:?}"
    );
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "lost within about one lease, took {:?}",
        stopped.elapsed()
    );
    assert!(!finished.load(Ordering::SeqCst), "the work was cancelled");

    server.start_again().expect("restart");
    let guard = locker
        .lock("job")
        .wait(Duration::from_secs(5))
        .await
        .expect("works again");
    guard.release().await.expect("ok");
}

#[tokio::test]
async fn a_lease_taken_over_is_reported_lost() {
    let server = server();
    let locker = Locker::builder(RedisLock::from_url(&server.url()).expect("url"))
        .lease(Duration::from_millis(300))
        .build();
    let guard = locker.lock("job").await.expect("free");
    let mut conn = common::raw(&server).await;
    // Someone deletes the key and takes it (an operator, a failover that lost the write).
    redis::cmd("SET")
        .arg("job")
        .arg("intruder")
        .query_async::<()>(&mut conn)
        .await
        .expect("SET");
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fired at the next renewal");
    assert!(!guard.is_held());
    assert!(
        matches!(guard.release().await, Err(LockError::NotOwned { .. })),
        "not ours"
    );
    assert_eq!(
        common::get(&mut conn, "job").await.as_deref(),
        Some("intruder"),
        "the intruder's key is left alone"
    );
}
