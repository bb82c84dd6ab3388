//! Shared by the modules: a cluster and locks on it.

use std::time::Duration;

use lock_etcd::EtcdLock;
use lock_testkit::EtcdCluster;

/// A one-member cluster.
pub(crate) fn one_member() -> EtcdCluster {
    EtcdCluster::start().expect("start etcd")
}

/// A lock on every member of `cluster`, with short timeouts.
pub(crate) fn lock_on(cluster: &EtcdCluster) -> EtcdLock {
    lock_at(cluster.endpoints())
}

/// A lock on the members at `endpoints`, with short timeouts.
pub(crate) fn lock_at(endpoints: Vec<String>) -> EtcdLock {
    EtcdLock::builder()
        .endpoints(endpoints)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid endpoints")
}
