//! [`Store`] on an etcd cluster: lock-etcd's keys read and released with the etcd client
//! (`crate::etcd`), and an `EtcdLock` on the same members for `run` and elections.

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::Lock;
use lock_etcd::EtcdLock;

use super::{Releases, Store};
use crate::cli::ScanArgs;
use crate::etcd::{EtcdTarget, read, release};
use crate::exit::Failure;
use crate::inspect::{Listing, LockInfo};

#[async_trait]
impl Store for EtcdTarget {
    fn backend(&self) -> &'static str {
        "etcd"
    }

    async fn scan(&self, pattern: &str, scan: &ScanArgs) -> Result<Listing, Failure> {
        read::list(self, pattern, scan.count, scan.foreign).await
    }

    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        read::describe(self, name).await
    }

    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
        release::release_token(self, name, token).await
    }

    fn lock(&self, _describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        Ok(Arc::new(
            EtcdLock::builder()
                .endpoints(self.urls.iter().cloned())
                .prefix(self.prefix.clone())
                .connect_timeout(self.connect_timeout)
                .command_timeout(self.command_timeout)
                .build()?,
        ))
    }

    async fn releases(&self) -> Result<Option<Box<dyn Releases>>, Failure> {
        Ok(Some(Box::new(
            crate::etcd::releases::EtcdReleases::start(self).await?,
        )))
    }

    /// Nothing to install: an etcd write is fenced by a transaction that compares and raises
    /// the resource's record (`EtcdLock::guarded_txn`), which any etcd client can send.
    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure> {
        Ok((
            "etcd: nothing to install (a fenced write is one transaction that compares and \
             raises the resource's fence record: EtcdLock::guarded_txn)"
                .to_owned(),
            serde_json::json!({ "backend": "etcd", "installed": [] }),
        ))
    }
}
