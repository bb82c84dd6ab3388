//! `min_hold = ".."` (with `ttl`): the lock is kept until that long after the grant even when
//! the body returns sooner (ShedLock's lockAtLeastFor), so a job scheduled on several machines
//! whose timers fire a little apart runs once.

use std::sync::Arc;
use std::time::Duration;

use distlock::{Locker, distributed_lock};
use tokio::time::sleep;

use crate::common::{Backend, SOON, each_backend};

#[distributed_lock("nightly:{day}", locker = locker, skip, ttl = "1m", min_hold = "30s")]
async fn nightly(locker: &Locker, day: u32) -> Option<u32> {
    Some(day)
}

#[distributed_lock("short:{day}", locker = locker, skip, ttl = "1m", min_hold = "1s")]
async fn short_hold(locker: &Locker, day: u32) -> Option<u32> {
    Some(day)
}

#[distributed_lock("slow:{day}", locker = locker, skip, ttl = "1m", min_hold = "10ms")]
async fn slower_than_min_hold(locker: &Locker, day: u32) -> Option<u32> {
    sleep(Duration::from_millis(100)).await;
    Some(day)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_is_kept_for_min_hold_after_the_body() {
    each_backend(|backend: Arc<Backend>| async move {
        let locker = &backend.locker;
        assert_eq!(nightly(locker, 1).await, Some(1));
        assert_eq!(nightly(locker, 1).await, None, "a second run is skipped");
        assert!(
            !backend.is_free("nightly:1").await,
            "still held after the body"
        );
        if backend.is_redis() {
            let left = backend.redis_pttl("nightly:1").expect("held");
            assert!(
                left <= Duration::from_secs(30),
                "shortened to min_hold: {left:?}"
            );
        }
        assert_eq!(nightly(locker, 2).await, Some(2), "another day");

        assert_eq!(short_hold(locker, 1).await, Some(1));
        assert!(
            backend.free_within("short:1", SOON).await,
            "free after min_hold"
        );

        assert_eq!(slower_than_min_hold(locker, 1).await, Some(1));
        assert!(
            backend.is_free("slow:1").await,
            "released at once: min_hold had passed"
        );
    })
    .await;
}
