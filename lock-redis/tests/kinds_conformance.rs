//! The lock kinds' behaviour suite (`lock_testkit::conformance`) over every backend it can
//! reach from here: `MemoryLock` on a paused clock, `RedisLock` on a fresh redis-server, and
//! (with the `cluster` feature) `RedisLock` on a real Redis Cluster for a subset, where every
//! key of one name must also sit in one hash slot.
//!
//! One test per check and backend, so a failure names both. (lock-core cannot run the suite
//! itself: dev-depending on lock-testkit would give it two copies of its own types.)

mod common;

use common::{conformance_memory as memory, conformance_redis as redis};

/// For each `module::check`, a test over MemoryLock (paused clock), `memory::module::check`, and
/// one over a fresh redis-server, `redis::module::check`.
macro_rules! over_memory_and_redis {
    ($($module:ident { $($check:ident),+ $(,)? })+) => {
        mod memory {
            $(mod $module {
                $(
                    #[tokio::test(start_paused = true)]
                    async fn $check() {
                        lock_testkit::conformance::$module::$check(
                            &crate::memory(),
                            concat!(stringify!($module), ":", stringify!($check)),
                        )
                        .await;
                    }
                )+
            })+
        }

        mod redis {
            $(mod $module {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $check() {
                        let server =
                            lock_testkit::RedisServer::start().expect("start redis-server");
                        lock_testkit::conformance::$module::$check(
                            &crate::redis(&server),
                            concat!(stringify!($module), ":", stringify!($check)),
                        )
                        .await;
                    }
                )+
            })+
        }
    };
}

over_memory_and_redis!(
    read_write {
        readers_share,
        writer_excludes_readers_and_writers,
        writer_preference_queues_new_readers,
        gave_up_writer_lets_readers_in,
        writer_preference_off_lets_readers_in,
        last_reader_release_wakes_writer,
        writer_release_wakes_all_readers,
        read_fencing_token_is_last_write,
        each_reader_renewed_alone,
        reentrancy,
        cancelled_acquires_leave_nothing,
    }
    semaphore {
        never_more_than_max,
        k_permits_at_once,
        waiter_for_k_wakes_when_k_free,
        permits_mismatch_is_an_error,
        available_counts,
        cancelled_acquires_leave_nothing,
    }
    fair {
        grants_in_arrival_order,
        single_try_does_not_jump_the_queue,
        gave_up_waiter_leaves_no_trace,
        fair_is_the_mutex,
    }
    multi {
        all_or_nothing,
        no_deadlock_or_overlap,
        losing_one_is_losing_the_guard,
        cancelled_acquire_leaves_nothing,
    }
);

/// The suite needs a real backend to mean anything: a check that passes over a backend
/// without the kinds would be a check of nothing.
#[tokio::test]
async fn redis_offers_the_kinds() {
    let server = lock_testkit::RedisServer::start().expect("start redis-server");
    let locker = redis(&server).locker();
    let read = locker.read("offered").try_acquire().await;
    assert!(
        matches!(read, Ok(Some(_))),
        "RedisLock serves reads: {read:?}"
    );
    let available = locker.semaphore("offered", 2).available().await;
    assert_eq!(available.ok(), Some(2), "RedisLock serves semaphores");
}

#[cfg(feature = "cluster")]
mod cluster {
    use std::time::Duration;

    use lock_core::Locker;
    use lock_redis::{RedisLock, key_slot};
    use lock_testkit::RedisCluster;
    use lock_testkit::conformance::{self, Backend};

    fn cluster_lock(cluster: &RedisCluster) -> RedisLock {
        RedisLock::builder()
            .cluster_urls(cluster.urls())
            .connect_timeout(Duration::from_secs(3))
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("cluster URLs")
    }

    fn backend(cluster: &RedisCluster) -> Backend {
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
        backend
    }

    /// Every key on every master whose name contains `name`, with the master it is on.
    fn keys_of(cluster: &RedisCluster, name: &str) -> Vec<(usize, String)> {
        let pattern = format!("*{name}*");
        cluster
            .masters()
            .into_iter()
            .flat_map(|master| {
                let keys = cluster.nodes()[master]
                    .command(&["KEYS", &pattern])
                    .expect("KEYS on a master");
                keys.lines()
                    .filter(|k| !k.is_empty())
                    .map(|k| (master, k.to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Asserts that the keys of `name` that exist now all hash to the slot of its lock key,
    /// by the server's own `CLUSTER KEYSLOT`, and sit on that slot's master; returns them.
    fn assert_one_slot(cluster: &RedisCluster, lock: &RedisLock, name: &str) -> Vec<String> {
        let slot = key_slot(&lock.key(name));
        let master = cluster.master_for_slot(slot).expect("a master serves it");
        let keys = keys_of(cluster, name);
        assert!(!keys.is_empty(), "{name} left no key while held");
        for (node, key) in &keys {
            let server_slot = cluster.nodes()[*node]
                .command(&["CLUSTER", "KEYSLOT", key])
                .expect("CLUSTER KEYSLOT");
            assert_eq!(
                server_slot,
                slot.to_string(),
                "{key} of {name} is outside the slot of {}",
                lock.key(name)
            );
            assert_eq!(*node, master, "{key} is on another master");
        }
        keys.into_iter().map(|(_, k)| k).collect()
    }

    /// Names of every shape (plain, hash-tagged, a stray `}`): a read share, a waiting writer's
    /// record, the write lock, semaphore permits and a fair queue all keep their keys in the
    /// name's slot.
    async fn keys_of_one_name_share_its_slot(cluster: &RedisCluster, backend: &Backend) {
        let lock = cluster_lock(cluster);
        for name in ["kinds:plain", "{kinds}:tagged", "kinds}stray"] {
            let reader = backend
                .locker()
                .read(name)
                .wait(backend.patience)
                .await
                .expect("read");
            let writer = {
                let (locker, name) = (backend.locker(), name.to_owned());
                tokio::spawn(async move {
                    locker
                        .write(name)
                        .wait(Duration::from_secs(20))
                        .await
                        .expect("write")
                })
            };
            tokio::time::sleep(backend.settle).await; // the writer records that it waits
            let with_reader = assert_one_slot(cluster, &lock, name);
            reader.release().await.expect("ours");
            let writer = backend
                .within("the writer", writer)
                .await
                .expect("writer task");
            let with_writer = assert_one_slot(cluster, &lock, name);
            writer.release().await.expect("ours");
            let permits = backend
                .locker()
                .semaphore(name, 3)
                .permits(2)
                .wait(backend.patience)
                .await
                .expect("permits");
            let with_permits = assert_one_slot(cluster, &lock, name);
            permits.release().await.expect("ours");
            let holder = backend.locker().fair(name).await.expect("fair");
            let waiter = {
                let (locker, name) = (backend.locker(), name.to_owned());
                tokio::spawn(async move {
                    locker
                        .fair(name)
                        .wait(Duration::from_secs(20))
                        .await
                        .expect("fair waiter")
                })
            };
            tokio::time::sleep(backend.settle).await; // the waiter queues
            let with_queue = assert_one_slot(cluster, &lock, name);
            holder.release().await.expect("ours");
            let waiter = backend
                .within("the fair waiter", waiter)
                .await
                .expect("fair waiter task");
            waiter.release().await.expect("ours");
            eprintln!(
                "{name}: {with_reader:?} / {with_writer:?} / {with_permits:?} / {with_queue:?}"
            );
        }
    }

    /// On one cluster (starting one is costly): the one-slot check, then a subset of the suite
    /// on names without a hash tag, so the keys' slot comes from the derived-key layout alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kinds_on_a_cluster() {
        let cluster = RedisCluster::start().expect("cluster");
        let backend = backend(&cluster);
        keys_of_one_name_share_its_slot(&cluster, &backend).await;
        conformance::read_write::readers_share(&backend, "c1").await;
        conformance::read_write::writer_preference_queues_new_readers(&backend, "c2").await;
        conformance::read_write::writer_release_wakes_all_readers(&backend, "c3").await;
        conformance::read_write::each_reader_renewed_alone(&backend, "c4").await;
        conformance::read_write::cancelled_acquires_leave_nothing(&backend, "c5").await;
        conformance::semaphore::never_more_than_max(&backend, "c6").await;
        conformance::semaphore::waiter_for_k_wakes_when_k_free(&backend, "c7").await;
        conformance::semaphore::cancelled_acquires_leave_nothing(&backend, "c8").await;
        conformance::fair::grants_in_arrival_order(&backend, "c9").await;
        conformance::fair::gave_up_waiter_leaves_no_trace(&backend, "c10").await;
        // Multi-lock names without a hash tag spread over slots: taken one by one.
        conformance::multi::all_or_nothing(&backend, "c11").await;
        conformance::multi::no_deadlock_or_overlap(&backend, "c12").await;
        conformance::multi::cancelled_acquire_leaves_nothing(&backend, "c13").await;
    }
}
