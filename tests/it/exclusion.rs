//! Mutual exclusion through the attribute: many concurrent calls on one name update a counter
//! non-atomically (read, await, write); no update is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use distlock::{LockError, Locker, distributed_lock};

use crate::common::{Backend, each_backend};

#[distributed_lock("counter:{name}", locker = locker, wait = "1m")]
async fn increment(locker: &Locker, name: &str, counter: &AtomicU64) -> Result<(), LockError> {
    let seen = counter.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2)).await; // a lost update shows if two run at once
    counter.store(seen + 1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_serialised() {
    each_backend(|backend: Arc<Backend>| async move {
        let counter = Arc::new(AtomicU64::new(0));
        let calls: Vec<_> = (0..40)
            .map(|_| {
                let (locker, counter) = (backend.locker.clone(), Arc::clone(&counter));
                tokio::spawn(async move { increment(&locker, "shared", &counter).await })
            })
            .collect();
        for call in calls {
            call.await.expect("no panic").expect("acquired");
        }
        assert_eq!(counter.load(Ordering::SeqCst), 40);
    })
    .await;
}
