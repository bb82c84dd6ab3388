//! One `PostgresLock` used from one tokio runtime after another (as every `#[tokio::test]`
//! has its own): the pooled connections and the release listener of a runtime that shut down
//! are replaced, and wake-ups keep working on the next runtime.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use lock_core::{Backoff, Locker};
use lock_postgres::PostgresLock;

/// On a fresh runtime: a waiter behind a 30 s holder, woken by the holder's release.
fn wake_up_on_a_fresh_runtime(lock: &Arc<PostgresLock>, holder_side: &Arc<PostgresLock>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let slow = Backoff::new(Duration::from_secs(20), Duration::from_secs(20));
        let holder = Locker::builder(Arc::clone(holder_side))
            .backoff(slow)
            .build()
            .lock("a")
            .fixed_ttl(Duration::from_secs(30))
            .await
            .expect("free");
        let waiter_side = Locker::builder(Arc::clone(lock)).backoff(slow).build();
        let waiter = tokio::spawn(async move {
            let guard = waiter_side.lock("a").wait(Duration::from_secs(15)).await?;
            guard.release().await
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        holder.release().await.expect("ours");
        waiter
            .await
            .expect("no panic")
            .expect("woken on this runtime too");
    });
}

#[test]
fn one_lock_serves_runtime_after_runtime() {
    let server = common::server();
    let setup = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (lock, holder_side) = setup.block_on(async {
        (
            Arc::new(common::lock(&server).await),
            Arc::new(common::lock(&server).await),
        )
    });
    drop(setup);
    for _ in 0..3 {
        wake_up_on_a_fresh_runtime(&lock, &holder_side);
    }
}
