//! `ttl = ".."`: a fixed lease, never renewed; work that outlives it is cancelled with
//! `LockError::Lost`, returned through the function's error type.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use distlock::{LockError, Locker, distributed_lock};
use tokio::time::sleep;

use crate::common::{AppError, Backend, each_backend, lease_left};

#[distributed_lock("report:{id}", locker = backend.locker, ttl = "5s")]
async fn fixed(backend: &Backend, id: u32) -> Result<(Duration, Option<Duration>), LockError> {
    Ok((lease_left(), backend.redis_pttl(&format!("report:{id}"))))
}

#[distributed_lock("report:{id}", locker = backend.locker)]
async fn renewed(backend: &Backend, id: u32) -> Result<(Duration, Option<Duration>), LockError> {
    Ok((lease_left(), backend.redis_pttl(&format!("report:{id}"))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_the_ttl() {
    each_backend(|backend: Arc<Backend>| async move {
        let (left, pttl) = fixed(&backend, 1).await.expect("free");
        assert!(left <= Duration::from_secs(5), "{left:?}");
        assert!(left > Duration::ZERO);
        if backend.is_redis() {
            let pttl = pttl.expect("the key has a TTL");
            assert!(pttl <= Duration::from_secs(5), "{pttl:?}");
        }
        // Without `ttl`: the locker's lease (30 s by default), renewed.
        let (left, pttl) = renewed(&backend, 2).await.expect("free");
        assert!(left > Duration::from_secs(5), "{left:?}");
        if backend.is_redis() {
            assert!(pttl.expect("the key has a TTL") > Duration::from_secs(5));
        }
    })
    .await;
}

#[distributed_lock("slow:{id}", locker = locker, ttl = "100ms")]
async fn outlives_its_lease(
    locker: &Locker,
    id: u32,
    finished: &AtomicBool,
) -> Result<(), AppError> {
    sleep(Duration::from_secs(3)).await;
    finished.store(true, Ordering::SeqCst); // never runs: the lease ran out first
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_longer_than_the_ttl_is_cancelled_with_lost() {
    each_backend(|backend: Arc<Backend>| async move {
        let finished = AtomicBool::new(false);
        let error = outlives_its_lease(&backend.locker, 1, &finished)
            .await
            .expect_err("the fixed lease ran out");
        assert!(
            matches!(&error, AppError::Lock(LockError::Lost { name }) if name == "slow:1"),
            "{error:?}"
        );
        assert!(!finished.load(Ordering::SeqCst), "the body was cancelled");
    })
    .await;
}
