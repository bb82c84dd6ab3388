//! A lease lost while the body runs (renewal finds the lock taken) cancels the body and comes
//! back as `LockError::Lost` through the function's error type; the body can watch the lease
//! through `distlock::current_lease()`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use distlock::{LockError, Locker, distributed_lock};
use tokio::sync::oneshot;
use tokio::time::sleep;

use crate::common::{AppError, Backend};

#[distributed_lock("ledger:{id}", locker = backend.locker)]
async fn long_work(
    backend: &Backend,
    id: u32,
    started: oneshot::Sender<u64>,
    finished: &AtomicBool,
) -> Result<(), AppError> {
    let lease = distlock::current_lease().expect("locked");
    assert!(lease.is_held());
    assert_eq!(lease.name(), format!("ledger:{id}"));
    started.send(lease.fencing_token()).expect("the test waits");
    sleep(Duration::from_secs(30)).await;
    finished.store(true, Ordering::SeqCst); // never: the lease is lost first
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_lease_cancels_the_body_with_lost() {
    let lease = Duration::from_millis(600);
    for backend in [
        Backend::memory_with(|b| b.lease(lease)),
        Backend::redis_with(|b| b.lease(lease)),
    ] {
        let backend = Arc::new(backend);
        let finished = Arc::new(AtomicBool::new(false));
        let (started, is_started) = oneshot::channel();
        let call = tokio::spawn({
            let (backend, finished) = (Arc::clone(&backend), Arc::clone(&finished));
            async move { long_work(&backend, 1, started, &finished).await }
        });
        let fence = is_started.await.expect("started");
        assert!(fence > 0);
        backend.steal("ledger:1");
        let error = call.await.expect("no panic").expect_err("lost");
        assert!(
            matches!(&error, AppError::Lock(LockError::Lost { name }) if name == "ledger:1"),
            "{error:?}"
        );
        assert!(!finished.load(Ordering::SeqCst), "the body was cancelled");
    }
}

// A 1 s fixed TTL: its stop point (800 ms) leaves the body time to hand its lease on even on a
// loaded machine (at 200 ms, a grant and a first poll slowed past 160 ms lost the lease before
// the body ran, and the test failed for want of a watcher).
#[distributed_lock("watch:{id}", locker = locker, ttl = "1s")]
async fn hands_its_lease_on(
    locker: &Locker,
    id: u32,
    observer: oneshot::Sender<tokio::task::JoinHandle<bool>>,
) -> Result<(), LockError> {
    // Work done outside the body's future (another task, a blocking thread) does not stop
    // when the body is cancelled: give it the lease and let it watch `lost()`.
    let lease = distlock::current_lease().expect("locked");
    let watcher = tokio::spawn(async move {
        tokio::select! {
            () = lease.lost() => true,
            () = sleep(Duration::from_secs(30)) => false,
        }
    });
    observer.send(watcher).expect("the test waits");
    sleep(Duration::from_secs(30)).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_outside_the_body_can_watch_the_lease() {
    for backend in [Backend::memory(), Backend::redis()] {
        let (observer, watcher) = oneshot::channel();
        let result = hands_its_lease_on(&backend.locker, 1, observer).await;
        assert!(matches!(result, Err(LockError::Lost { .. })), "{result:?}");
        let watcher = watcher.await.expect("sent");
        assert!(watcher.await.expect("no panic"), "the watcher saw the loss");
    }
}
