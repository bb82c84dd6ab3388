//! Builds the worker's `Locker` through distlock's public API, as a user would.

use distlock::{
    LockError, Locker, etcd::EtcdLock, mysql::MysqlLock, postgres::PostgresLock, redis::RedisLock,
    redlock::Redlock,
};

use super::config::{Backend, WorkerConfig};

/// A `Locker` on the configured backend whose leases last the TTL and are renewed every third
/// of it while their guard lives, and the `EtcdLock` under it on etcd (its guarded commits are
/// the etcd scenarios' fence).
///
/// # Errors
/// If the backend rejects its configuration.
pub(crate) fn locker(config: &WorkerConfig) -> Result<(Locker, Option<EtcdLock>), LockError> {
    let timeout = config.command_timeout();
    // The fleet's longest lease is the workers' lease: the grace period's rule.
    let grace = config.grace();
    let mut etcd = None;
    let locker = match &config.backend {
        Backend::Single { url } => Locker::builder(
            RedisLock::builder()
                .url(url.as_str())
                .command_timeout(timeout)
                .connect_timeout(timeout)
                .grace(grace)
                .strict(config.strict)
                .build()?,
        ),
        Backend::Redlock { urls } => {
            // Each node keeps RedisLock's default command timeout, above the Redlock's own
            // per-node timeout, as lock-redlock's README advises: a slow node then keeps its
            // connection and applies a late acquire before the release that follows it.
            let mut redlock = Redlock::builder();
            for (i, url) in urls.iter().enumerate() {
                let node = RedisLock::builder()
                    .url(url.as_str())
                    .grace(grace)
                    .build()?;
                redlock = redlock.named_node(i.to_string(), node);
            }
            Locker::builder(redlock.build()?)
        }
        Backend::Cluster { urls } => Locker::builder(
            RedisLock::builder()
                .cluster_urls(urls.iter().map(String::as_str))
                .command_timeout(timeout)
                .connect_timeout(timeout)
                .grace(grace)
                .strict(config.strict)
                .build()?,
        ),
        Backend::Postgres { url } => Locker::builder(
            PostgresLock::builder()
                .url(url.as_str())
                .statement_timeout(timeout)
                .connect_timeout(timeout)
                .build()?,
        ),
        Backend::Mysql { url } => Locker::builder(
            MysqlLock::builder()
                .url(url.as_str())
                .statement_timeout(timeout)
                .connect_timeout(timeout)
                .build()?,
        ),
        Backend::ObjectStore { endpoint, url } => {
            Locker::builder(crate::resource::s3_lock(endpoint, url, timeout)?)
        }
        Backend::Etcd { endpoints } => {
            let lock = EtcdLock::builder()
                .endpoints(endpoints.iter().map(String::as_str))
                .command_timeout(timeout)
                .connect_timeout(timeout)
                .build()?;
            etcd = Some(lock.clone());
            Locker::builder(lock)
        }
    };
    Ok((locker.lease(config.ttl()).wait(config.wait()).build(), etcd))
}
