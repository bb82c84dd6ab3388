//! The conformance suite (`lock_testkit::conformance`) over `RedisLock`: every check of every
//! module, one test per module, on a fresh redis-server (`redis::read_write`), and
//! on a fresh Valkey server (`valkey::...`), and
//! with the `cluster` feature on a real Redis Cluster (`cluster::...`) and a Valkey Cluster
//! (`valkey_cluster::...`), where every key of one
//! name must also sit in one hash slot. What runs comes from the suite's one list and
//! `RedisLock`'s capability table; `MemoryLock` runs it in lock-testkit's own tests, Redlock
//! and PostgreSQL in their crates.

/// What `key` holds, read on `conn` (a server's or a cluster's connection).
async fn get(conn: &mut impl ::redis::aio::ConnectionLike, key: String) -> Option<String> {
    ::redis::cmd("GET")
        .arg(key)
        .query_async::<Option<String>>(conn)
        .await
        .expect("GET")
}

/// The suite's guarded writes through `fences` (`FCALL distlock_fenced_set`), read back with
/// `read`.
fn guarded_writes<R, RF>(
    fences: lock_redis::RedisFences,
    read: R,
) -> lock_testkit::conformance::GuardedWrites
where
    R: Fn(String) -> RF + Send + Sync + 'static,
    RF: std::future::Future<Output = Option<String>> + Send + 'static,
{
    lock_testkit::conformance::GuardedWrites::new(
        move |fence, value: String| {
            let fences = fences.clone();
            async move { fences.set(&fence, value.as_bytes(), None).await }
        },
        read,
    )
}

/// Lockers each with a `RedisLock` of their own (their own pool and pub/sub connection, like
/// other processes) on a fresh redis-server per check.
mod redis {
    use lock_core::Locker;
    use lock_redis::RedisLock;
    use lock_testkit::RedisServer;
    use lock_testkit::conformance::Backend;

    /// The suite's store on `server`, release announcements on; late answers through a
    /// proxy on the commands' connections; guarded writes through the `distlock` function
    /// library.
    pub(super) fn backend(server: &RedisServer) -> Backend {
        let url = server.url();
        let lock = move |url: &str| {
            Locker::new(
                RedisLock::builder()
                    .url(url)
                    .pubsub_url(url)
                    .build()
                    .expect("valid URL"),
            )
        };
        let fences = RedisLock::from_url(&url).expect("valid URL").fences();
        let reads = url.clone();
        let read = move |key: String| {
            let url = reads.clone();
            async move {
                let mut conn = redis::Client::open(url)
                    .expect("valid URL")
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect");
                super::get(&mut conn, key).await
            }
        };
        Backend::new(move || lock(url.as_str()))
            .with_late_answers_through(server.addr(), move |at| lock(&format!("redis://{at}")))
            .with_guarded_writes(super::guarded_writes(fences, read))
    }

    fn setup() -> (RedisServer, Backend) {
        let server = RedisServer::start().expect("start redis-server");
        let backend = backend(&server);
        (server, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup()
    );

    /// The suite needs a real backend to mean anything: a check that passes over a backend
    /// without the kinds would be a check of nothing. RedisLock declares them and serves them.
    #[tokio::test]
    async fn redis_offers_the_kinds() {
        let (_server, backend) = setup();
        let caps = backend.capabilities();
        assert!(caps.read_write && caps.semaphore && caps.fair, "{caps:?}");
        let locker = backend.locker();
        let read = locker.read("offered").try_acquire().await;
        assert!(
            matches!(read, Ok(Some(_))),
            "RedisLock serves reads: {read:?}"
        );
        let available = locker.semaphore("offered", 2).available().await;
        assert_eq!(available.ok(), Some(2), "RedisLock serves semaphores");
    }
}

/// The same over Valkey (`valkey-server`, installed by `scripts/ensure-valkey.sh`): a fresh
/// server per check, the same `RedisLock`, every check of every module.
mod valkey {
    use lock_testkit::conformance::Backend;
    use lock_testkit::{RedisServer, VALKEY_VERSION};

    fn setup() -> (RedisServer, Backend) {
        let server = RedisServer::builder()
            .valkey()
            .start()
            .expect("start valkey-server (scripts/ensure-valkey.sh installs it)");
        let backend = super::redis::backend(&server);
        (server, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup()
    );

    /// The runner really runs on Valkey, at the version the scripts install (or a later one on
    /// `PATH`), not on a Redis picked up by mistake.
    #[test]
    fn the_server_is_valkey() {
        let (server, _backend) = setup();
        let info = server.command(&["INFO", "server"]).expect("INFO server");
        assert!(info.contains("server_name:valkey"), "{info}");
        let version = info
            .lines()
            .find_map(|line| line.strip_prefix("valkey_version:"))
            .unwrap_or_else(|| panic!("no valkey_version in {info}"));
        let major = |v: &str| {
            v.split('.')
                .next()
                .and_then(|m| m.trim().parse::<u32>().ok())
        };
        assert!(major(version) >= major(VALKEY_VERSION), "{version}");
    }
}

/// On a real Redis Cluster, shared by the checks that run at the same time (starting one is
/// costly): names without a hash tag, so each key's slot comes from the key layout alone.
#[cfg(feature = "cluster")]
mod cluster {
    use std::sync::{Arc, Mutex, PoisonError, Weak};
    use std::time::Duration;

    use lock_core::Locker;
    use lock_redis::{RedisLock, key_slot};
    use lock_testkit::RedisCluster;
    use lock_testkit::conformance::Backend;

    /// The cluster of the checks running now, or a new one: it is stopped (by its PIDs) when
    /// the last check holding it ends.
    fn shared_cluster() -> Arc<RedisCluster> {
        static CLUSTER: Mutex<Weak<RedisCluster>> = Mutex::new(Weak::new());
        shared(&CLUSTER, RedisCluster::builder())
    }

    /// The cluster in `slot` if a running check holds it, else one started from `builder`.
    pub(super) fn shared(
        slot: &Mutex<Weak<RedisCluster>>,
        builder: lock_testkit::RedisClusterBuilder,
    ) -> Arc<RedisCluster> {
        let mut shared = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cluster) = shared.upgrade() {
            return cluster;
        }
        let cluster = Arc::new(builder.start().expect("cluster"));
        *shared = Arc::downgrade(&cluster);
        cluster
    }

    fn cluster_lock(cluster: &RedisCluster) -> RedisLock {
        RedisLock::builder()
            .cluster_urls(cluster.urls())
            .connect_timeout(Duration::from_secs(3))
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("cluster URLs")
    }

    pub(super) fn backend(cluster: &RedisCluster) -> Backend {
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
        let fences = cluster_lock(cluster).fences();
        let urls = cluster.urls();
        let read = move |key: String| {
            let urls = urls.clone();
            async move {
                let mut conn = redis::cluster::ClusterClient::new(urls)
                    .expect("urls")
                    .get_async_connection()
                    .await
                    .expect("connect");
                super::get(&mut conn, key).await
            }
        };
        // A cluster's clients follow redirections to the nodes' own addresses, where no proxy
        // stands: answers are delayed around the lock (RedisLock below its answers is checked
        // by the single-server runners, through a proxy).
        backend
            .with_late_answers_around_the_lock()
            .with_guarded_writes(super::guarded_writes(fences, read))
            .with_address(|at| {
                Locker::new(
                    RedisLock::builder()
                        .cluster_urls([format!("redis://{at}")])
                        .connect_timeout(Duration::from_secs(2))
                        .command_timeout(Duration::from_secs(2))
                        .build()
                        .expect("cluster URLs"),
                )
            })
    }

    fn setup() -> (Arc<RedisCluster>, Backend) {
        let cluster = shared_cluster();
        let backend = backend(&cluster);
        (cluster, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup()
    );

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
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keys_of_one_name_share_its_slot() {
        let (cluster, backend) = setup();
        let lock = cluster_lock(&cluster);
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
            let with_reader = assert_one_slot(&cluster, &lock, name);
            reader.release().await.expect("ours");
            let writer = backend
                .within("the writer", writer)
                .await
                .expect("writer task");
            let with_writer = assert_one_slot(&cluster, &lock, name);
            writer.release().await.expect("ours");
            let permits = backend
                .locker()
                .semaphore(name, 3)
                .permits(2)
                .wait(backend.patience)
                .await
                .expect("permits");
            let with_permits = assert_one_slot(&cluster, &lock, name);
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
            let with_queue = assert_one_slot(&cluster, &lock, name);
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
}

/// The same checks on a Valkey Cluster (`valkey-server --cluster-enabled yes`, 3 masters and 3
/// replicas), shared like the Redis one: the native release and extension on every master.
#[cfg(feature = "cluster")]
mod valkey_cluster {
    use std::sync::{Arc, Mutex, Weak};

    use lock_testkit::RedisCluster;
    use lock_testkit::conformance::Backend;

    fn setup() -> (Arc<RedisCluster>, Backend) {
        static CLUSTER: Mutex<Weak<RedisCluster>> = Mutex::new(Weak::new());
        let cluster = super::cluster::shared(&CLUSTER, RedisCluster::builder().valkey());
        let backend = super::cluster::backend(&cluster);
        (cluster, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup()
    );
}
