//! The conformance suite (`lock_testkit::conformance`) over `EtcdLock` on one member: every
//! check of every module, one test per module, from its capability table: every kind, the
//! multi-lock in one transaction. Every locker has an `EtcdLock` of its own (its own client and watch
//! feed, like another process).
//!
//! etcd counts lease TTLs in whole seconds and raises them to its minimum (1.5 election
//! timeouts: 2 s with the kit's timing), so the suite's short TTL is 2 s here: a shorter one
//! would be granted for 2 s, and the checks that a lease ran out by its TTL would wait for it.
//! The settle time is 1 s: etcd deletes the keys of an expired lease on a 500 ms tick.

/// One member, a lock per locker on its endpoint.
mod one_member {
    use std::time::Duration;

    use lock_core::{Fence, Locker};
    use lock_etcd::EtcdLock;
    use lock_etcd::etcd_client::TxnOp;
    use lock_testkit::EtcdCluster;
    use lock_testkit::conformance::{Backend, GuardedWrites};

    fn setup() -> (EtcdCluster, Backend) {
        let cluster = EtcdCluster::start().expect("start etcd");
        let endpoints = cluster.endpoints();
        // Late answers through a proxy in front of the member.
        let mut backend = Backend::new(move || {
            Locker::new(EtcdLock::new(endpoints.iter().cloned()).expect("valid endpoints"))
        })
        .with_late_answers_through(cluster.member(0).client_addr(), |at| {
            Locker::new(EtcdLock::new([format!("http://{at}")]).expect("valid endpoint"))
        });
        let lock = EtcdLock::new(cluster.endpoints()).expect("valid endpoints");
        let reads = lock.clone();
        backend = backend.with_guarded_writes(GuardedWrites::new(
            move |fence: Fence, value: String| {
                let lock = lock.clone();
                async move {
                    let put = TxnOp::put(fence.resource.as_bytes(), value, None);
                    lock.guarded_commit(&fence, [put]).await.map(drop)
                }
            },
            move |resource: String| {
                let lock = reads.clone();
                async move {
                    let mut kv = lock.client().await.expect("client").kv_client();
                    let got = kv.get(resource, None).await.expect("get");
                    got.kvs()
                        .first()
                        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
                }
            },
        ));
        backend.short_ttl = Duration::from_secs(2);
        // etcd revokes leases that ran out on a 500 ms tick of its leader: a key outlives the
        // holder's `lost` by up to that much, which the checks that look for the store's
        // expiry wait out in `settle`.
        backend.settle = Duration::from_secs(1);
        backend.patience = Duration::from_secs(15);
        (cluster, backend)
    }

    lock_testkit::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        setup()
    );
}
