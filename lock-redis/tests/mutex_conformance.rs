//! The exclusive lock's behaviour suite (`lock_testkit::conformance::mutex`) over `MemoryLock`
//! on a paused clock, `RedisLock` on a fresh redis-server, and (with the `cluster` feature)
//! `RedisLock` on a real Redis Cluster for a subset. Redlock runs it in lock-redlock's
//! `tests/mutex_conformance.rs`, Postgres in lock-postgres's.
//!
//! One test per check and backend, so a failure names both.

mod common;

use common::{conformance_memory as memory, conformance_redis as redis};

/// Each check over MemoryLock (paused clock), `memory::check`, and over a fresh redis-server,
/// `redis::check`.
mod memory {
    lock_testkit::mutex_conformance_tests!(
        #[tokio::test(start_paused = true)]
        ((), crate::memory())
    );
}

mod redis {
    lock_testkit::mutex_conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        {
            let server = lock_testkit::RedisServer::start().expect("start redis-server");
            let backend = crate::redis(&server);
            (server, backend)
        }
    );
}

#[cfg(feature = "cluster")]
mod cluster {
    use std::time::Duration;

    use lock_core::Locker;
    use lock_redis::RedisLock;
    use lock_testkit::RedisCluster;
    use lock_testkit::conformance::{Backend, mutex};

    /// On one cluster (starting one is costly), the whole mutex suite on names without a hash
    /// tag, so each name's slot comes from the key layout alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mutex_on_a_cluster() {
        let cluster = RedisCluster::start().expect("cluster");
        let urls = cluster.urls();
        let mut backend = Backend::new(move || {
            Locker::new(
                RedisLock::builder()
                    .cluster_urls(urls.clone())
                    .connect_timeout(Duration::from_secs(3))
                    .command_timeout(Duration::from_secs(2))
                    .build()
                    .expect("cluster URLs"),
            )
        });
        backend.settle = Duration::from_millis(300);
        backend.patience = Duration::from_secs(20);
        mutex::exclusion_among_tasks(&backend, "m1").await;
        mutex::expiry_frees_the_name(&backend, "m2").await;
        mutex::stale_release_is_not_ours(&backend, "m3").await;
        mutex::stale_extend_is_not_ours(&backend, "m4").await;
        mutex::fencing_increases(&backend, "m5").await;
        mutex::hand_over_within_one_locker(&backend, "m6").await;
        mutex::wakeups_across_lockers(&backend, "m7").await;
        mutex::cancelled_acquire_leaves_nothing(&backend, "m8").await;
        mutex::renewal_outlives_the_lease(&backend, "m9").await;
        mutex::renewal_notices_loss(&backend, "m10").await;
        mutex::bad_input_sends_nothing(&backend, "m11").await;
    }
}
