//! [`Store`] on one Redis or Valkey deployment (single, Cluster, Sentinel): reads with plain
//! commands on every master (`redis_read.rs`), changes through a `RedisLock` built from the same
//! URLs (`connect`), and counts release announcements with pub/sub (`watch`).

use std::sync::Arc;

use async_trait::async_trait;
use lock_core::backend::Lock;
use lock_redis::RedisLock;

use super::{Releases, Store, redis_read};
use crate::cli::ScanArgs;
use crate::connect::Target;
use crate::exit::Failure;
use crate::inspect::{Listing, LockInfo};

#[async_trait]
impl Store for Target {
    fn backend(&self) -> &'static str {
        "redis"
    }

    async fn scan(&self, pattern: &str, scan: &ScanArgs) -> Result<Listing, Failure> {
        redis_read::list(self, pattern, scan.count, scan.foreign).await
    }

    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        redis_read::describe(self, &self.key(name)).await
    }

    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
        Ok(self
            .lock_with(RedisLock::builder())?
            .release_token(name, token)
            .await?)
    }

    fn lock(&self, describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure> {
        let builder = match describe {
            Some(note) => RedisLock::builder().holder_note(note),
            None => RedisLock::builder(),
        };
        Ok(Arc::new(self.lock_with(builder)?))
    }

    fn describes_grants(&self) -> bool {
        true
    }

    async fn releases(&self) -> Result<Option<Box<dyn Releases>>, Failure> {
        Ok(Some(Box::new(
            super::redis_releases::RedisReleases::start(self).await?,
        )))
    }

    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure> {
        let load = self
            .lock_with(RedisLock::builder())?
            .fences()
            .load()
            .await?;
        Ok((
            format!("Redis: {load}"),
            serde_json::json!({
                "backend": "redis",
                "library": "distlock",
                "version": lock_redis::LIBRARY_VERSION,
                "functions": load.uses_functions(),
                "outcome": load.to_string(),
            }),
        ))
    }
}
