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
    EtcdLock::builder()
        .endpoints(cluster.endpoints())
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid endpoints")
}
