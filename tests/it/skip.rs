//! `skip`: when the lock stays busy the body does not run (ShedLock's semantics) and the
//! function returns `()` or `None`; without `wait` it tries once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use distlock::{Locker, distributed_lock};
use tokio::time::sleep;

use crate::common::{Backend, each_backend};

#[distributed_lock("job:{name}", locker = locker, skip)]
async fn tick(locker: &Locker, name: &str, runs: &AtomicU32) {
    runs.fetch_add(1, Ordering::SeqCst);
}

#[distributed_lock("job:{name}", locker = locker, skip)]
async fn report(locker: &Locker, name: &str) -> Option<String> {
    Some(format!("report {name}"))
}

#[distributed_lock("job:{name}", locker = locker, skip, wait = "1m")]
async fn patient(locker: &Locker, name: &str) -> Option<u8> {
    Some(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_lock_skips_the_body() {
    each_backend(|backend: Arc<Backend>| async move {
        let runs = AtomicU32::new(0);
        let locker = &backend.locker;
        tick(locker, "a", &runs).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "free: the body ran");
        assert_eq!(report(locker, "a").await.as_deref(), Some("report a"));

        let release = backend.hold_elsewhere("job:a").await;
        tick(locker, "a", &runs).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "busy: skipped at once");
        assert_eq!(report(locker, "a").await, None);
        tick(locker, "b", &runs).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2, "another name is free");

        let waiting = tokio::spawn({
            let locker = locker.clone();
            async move { patient(&locker, "a").await }
        });
        sleep(Duration::from_millis(100)).await;
        drop(release);
        assert_eq!(
            waiting.await.expect("no panic"),
            Some(1),
            "waited, then ran"
        );
    })
    .await;
}

#[distributed_lock("job:{name}", locker = locker, skip)]
async fn stolen_midway(locker: &Locker, name: &str, finished: &AtomicBool) -> Option<()> {
    sleep(Duration::from_secs(5)).await;
    finished.store(true, Ordering::SeqCst);
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_cancels_the_body_and_returns_none() {
    let lease = Duration::from_millis(600);
    for backend in [
        Backend::memory_with(|b| b.lease(lease)),
        Backend::redis_with(|b| b.lease(lease)),
    ] {
        let backend = Arc::new(backend);
        let finished = Arc::new(AtomicBool::new(false));
        let job = tokio::spawn({
            let (backend, finished) = (Arc::clone(&backend), Arc::clone(&finished));
            async move { stolen_midway(&backend.locker, "c", &finished).await }
        });
        sleep(Duration::from_millis(100)).await;
        backend.steal("job:c");
        assert_eq!(job.await.expect("no panic"), None);
        assert!(!finished.load(Ordering::SeqCst), "the body was cancelled");
    }
}
