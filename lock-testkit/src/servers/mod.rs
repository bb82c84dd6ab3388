//! The servers the tests start and stop: one `redis-server` (or Valkey's `valkey-server`), a
//! Redis Cluster, a Sentinel set, PostgreSQL, PgBouncer, etcd, and the fault proxy put in front
//! of any of them; with what they share to launch (free ports, finding the binaries, starting a
//! process until it answers, querying a Redis node).

// The servers, one module each.
mod cluster;
mod etcd;
mod fake_s3;
mod mariadb;
mod pgbouncer;
mod postgres;
mod proxy;
mod redis;
mod seaweedfs;
mod sentinel;
mod valkey;

// What the servers share.
mod binary;
mod client;
mod fake_clock;
mod launch;
mod poll;
mod port;
mod probe;
mod role;
#[cfg(feature = "tls")]
mod tls;

pub use binary::{cache_dir, redis_server_binary, try_redis_server_binary};
pub use cluster::{CLUSTER_SLOTS, ClusterNode, RedisCluster, RedisClusterBuilder, SlotMigration};
pub use etcd::{
    ETCD_VERSION, EtcdCluster, EtcdClusterBuilder, EtcdMember, EtcdNetwork, etcd_install_dir,
    try_etcd_binary,
};
pub use fake_clock::{FakeClock, Faked, try_faketime_library};
pub use fake_s3::FakeS3;
pub use mariadb::{MariadbServer, MariadbServerBuilder};
pub use pgbouncer::{PgBouncer, PgBouncerBuilder, PoolMode, pgbouncer_binary};
pub use port::free_port;
pub use postgres::{PostgresServer, PostgresServerBuilder, postgres_bin_dir};
pub use proxy::FaultProxy;
pub use redis::{KeepData, RedisServer, RedisServerBuilder};
pub use role::Role;
pub use seaweedfs::{
    SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_BUCKET, SEAWEEDFS_SECRET_KEY, SEAWEEDFS_VERSION,
    SeaweedfsServer, seaweedfs_install_dir, try_weed_binary,
};
pub use sentinel::{RedisSentinelSet, RedisSentinelSetBuilder};
#[cfg(feature = "tls")]
pub use tls::TestCertificates;
pub use valkey::{VALKEY_VERSION, try_valkey_server_binary, valkey_install_dir};
