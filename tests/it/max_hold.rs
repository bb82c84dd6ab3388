//! `max_hold = ".."`: renewal stops that long after the grant, so work that runs on past it
//! loses the lease and is cancelled.

use std::sync::Arc;
use std::time::Duration;

use distlock::{LockError, distributed_lock};
use tokio::time::sleep;

use crate::common::Backend;

#[distributed_lock("capped:{id}", locker = backend.locker, max_hold = "1s")]
async fn runs_too_long(backend: &Backend, id: u32) -> Result<(), LockError> {
    sleep(Duration::from_secs(30)).await;
    Ok(())
}

#[distributed_lock("capped:{id}", locker = backend.locker, max_hold = "1m")]
async fn within_the_cap(backend: &Backend, id: u32) -> Result<u32, LockError> {
    sleep(Duration::from_millis(1500)).await; // longer than the lease: renewed
    Ok(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_stops_at_max_hold() {
    let lease = Duration::from_millis(600);
    for backend in [
        Backend::memory_with(|b| b.lease(lease)),
        Backend::redis_with(|b| b.lease(lease)),
    ] {
        let backend = Arc::new(backend);
        let (capped, kept) = tokio::join!(runs_too_long(&backend, 1), within_the_cap(&backend, 2));
        let error = capped.expect_err("lost after the cap");
        assert!(matches!(error, LockError::Lost { .. }), "{error}");
        assert_eq!(kept.expect("renewed within the cap"), 2);
    }
}
