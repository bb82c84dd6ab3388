//! `renew`: without `ttl` the lease is renewed while the body runs (`renew = true` says so
//! explicitly); `renew = false` with a `ttl` makes it a fixed lease.

use std::sync::Arc;
use std::time::Duration;

use distlock::{LockError, distributed_lock};
use tokio::time::sleep;

use crate::common::{Backend, lease_left};

/// Longer than three leases of the locker below: only renewal keeps the lock that long.
const WORK: Duration = Duration::from_millis(3500);

#[distributed_lock("renewed:{id}", locker = backend.locker)]
async fn by_default(backend: &Backend, id: u32) -> Result<bool, LockError> {
    sleep(WORK).await;
    Ok(!backend.is_free(&format!("renewed:{id}")).await)
}

#[distributed_lock("renewed:{id}", locker = backend.locker, renew = true)]
async fn explicitly(backend: &Backend, id: u32) -> Result<bool, LockError> {
    sleep(WORK).await;
    Ok(!backend.is_free(&format!("renewed:{id}")).await)
}

#[distributed_lock("fixed:{id}", locker = backend.locker, renew = false, ttl = "1s")]
async fn not_renewed(backend: &Backend, id: u32) -> Result<(), LockError> {
    assert!(lease_left() <= Duration::from_secs(1));
    sleep(WORK).await;
    Ok(())
}

fn backends() -> [Backend; 2] {
    // A 1 s lease, renewed every third of it.
    let lease = Duration::from_secs(1);
    [
        Backend::memory_with(|b| b.lease(lease)),
        Backend::redis_with(|b| b.lease(lease)),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_lease_outlives_its_length() {
    for backend in backends() {
        let backend = Arc::new(backend);
        let (first, second) = tokio::join!(by_default(&backend, 1), explicitly(&backend, 2));
        assert!(first.expect("kept"), "still held after the work");
        assert!(second.expect("kept"), "still held after the work");
        assert!(backend.is_free("renewed:1").await, "released at the end");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_renewal_the_lease_runs_out() {
    for backend in backends() {
        let error = not_renewed(&backend, 1).await.expect_err("ran out");
        assert!(matches!(error, LockError::Lost { .. }), "{error}");
    }
}
